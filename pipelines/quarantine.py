"""Quarantine: every record that failed parsing or a rule, with the raw record and the reasons."""

from pyspark import pipelines as dp

from exactly_once.settings.pipeline import pipeline_settings
from exactly_once.transforms.silver import quarantined_records

settings = pipeline_settings(spark)

dp.create_streaming_table(
    name="quarantine",
    comment="Records that failed parsing or validation; `errors` names every failed rule.",
)

for topic in settings.topics.values():

    @dp.append_flow(target="quarantine", name=f"quarantine_{topic.dataset_suffix}")
    @dp.expect("names_its_reasons", "size(errors) > 0 AND reason <> ''")
    def quarantine_topic(topic=topic):
        return quarantined_records(spark.readStream.table(f"parsed_{topic.dataset_suffix}"), topic)
