from pathlib import Path

import pytest

from exactly_once.errors import SettingsError
from exactly_once.settings.pipeline import Settings, load_settings, setting_overrides
from exactly_once.settings.quality import TableQuality, load_quality


def test_local_settings_round_trip_through_spark_conf_keys():
    settings = load_settings("local")
    conf = settings.to_conf()
    assert Settings.from_conf(conf.get) == settings
    assert conf["exactly_once.topics.orders.key"] == "order_id"
    assert settings.topic("orders").sequence_by == ("sequence", "event_id")
    assert "has_event_id" in settings.topic("player_rewards").rules


def test_the_kafka_source_reads_only_committed_transactions_by_default():
    assert load_settings("local").kafka.isolation_level == "read_committed"
    for target in ("dev", "prod"):  # what the bundle gives the pipeline on Databricks
        assert load_settings(target).to_conf()["exactly_once.kafka.isolation_level"] == \
            "read_committed"


@pytest.mark.parametrize("key, value, message", [
    ("exactly_once.kafka.bootstrap_servers", "", "exactly_once.kafka.bootstrap_servers is missing"),
    ("exactly_once.topics.orders.watermark_delay", "soon",
     "exactly_once.topics.orders.watermark_delay must look like"),
    ("exactly_once.kafka.max_offsets_per_trigger", "many",
     "exactly_once.kafka.max_offsets_per_trigger must be an integer"),
    ("exactly_once.kafka.fail_on_data_loss", "maybe",
     "exactly_once.kafka.fail_on_data_loss must be true or false"),
    ("exactly_once.kafka.isolation_level", "READ_COMMITTED",
     "exactly_once.kafka.isolation_level must be one of read_committed, read_uncommitted"),
    ("exactly_once.kafka.poll_timeout_ms", "0",
     "exactly_once.kafka.poll_timeout_ms must be a positive integer"),
    ("exactly_once.kafka.request_timeout_ms", "30000",
     r"exactly_once.kafka.default_api_timeout_ms \(20000\) must be at least "
     r"exactly_once.kafka.request_timeout_ms \(30000\)"),
    ("exactly_once.topics.orders.rules", "[1, 2]", "exactly_once.topics.orders.rules must map"),
    ("exactly_once.source", "s3://bucket", "exactly_once.source must be"),
    ("exactly_once.topics.orders.max_clock_skew", "a bit",
     "exactly_once.topics.orders.max_clock_skew must look like"),
    ("exactly_once.topics.orders.rules", '{"occurred_at_in_future": "true"}',
     "`occurred_at_in_future` comes from exactly_once.topics.orders.max_clock_skew"),
])
def test_a_bad_setting_fails_naming_its_key(key, value, message):
    conf = load_settings("local").to_conf() | {key: value}
    with pytest.raises(SettingsError, match=message):
        Settings.from_conf(conf.get)


def test_set_overrides_a_setting_for_one_run_and_refuses_unknown_keys():
    overrides = setting_overrides(["kafka.fail_on_data_loss=false",
                                   "kafka.max_offsets_per_trigger = 2"])
    settings = load_settings("local", overrides=overrides)
    assert not settings.kafka.fail_on_data_loss and settings.kafka.max_offsets_per_trigger == 2
    for wrong in ["kafka.fail_on_dataloss=false", "kafka.fail_on_data_loss", "=1"]:
        with pytest.raises(SettingsError, match="expected KEY=VALUE with KEY a setting of conf/"):
            setting_overrides([wrong])
    with pytest.raises(SettingsError, match="fail_on_data_loss must be true or false"):
        load_settings("local", overrides=setting_overrides(["kafka.fail_on_data_loss=no"]))


def test_unknown_target_lists_the_known_ones():
    with pytest.raises(SettingsError, match="unknown target 'staging'.*local"):
        load_settings("staging")


def test_target_file_overrides_base(tmp_path: Path):
    conf = tmp_path / "conf"
    (conf / "targets").mkdir(parents=True)
    (conf / "base.yml").write_text(Path("conf/base.yml").read_text())
    (conf / "targets" / "x.yml").write_text(
        "kafka:\n  bootstrap_servers: broker:9093\ntopics:\n  orders:\n"
        "    watermark_delay: 2 hours\n")
    settings = load_settings("x", conf_dir=conf)
    assert settings.kafka.bootstrap_servers == "broker:9093"
    assert settings.topic("orders").watermark_delay == "2 hours"
    assert settings.topic("orders").key == "order_id"  # untouched base value


def test_a_target_file_that_is_not_yaml_fails_showing_its_line(tmp_path: Path):
    """conf/ is parsed by libyaml; the file it refuses is read again by PyYAML's own parser for
    a message that shows where (conf_files.py)."""
    conf = tmp_path / "conf"
    (conf / "targets").mkdir(parents=True)
    (conf / "base.yml").write_text(Path("conf/base.yml").read_text())
    (conf / "targets" / "x.yml").write_text("kafka:\n  bootstrap_servers: [broker:9093\n"
                                            "topics: {}\n")
    with pytest.raises(SettingsError) as refused:
        load_settings("x", conf_dir=conf)
    message = str(refused.value)
    assert "x.yml is not valid YAML" in message and "line 3" in message
    assert "topics: {}" in message and "^" in message, message  # the line, pointed at


def test_max_clock_skew_adds_the_plausibility_rule_after_the_configured_ones():
    settings = load_settings("local")
    for topic in settings.topics.values():
        assert topic.max_clock_skew == "5 minutes"
        name, sql = list(topic.rules.items())[-1]
        assert name == "occurred_at_in_future" and sql.endswith(
            "occurred_at <= kafka_timestamp + INTERVAL 5 minutes")
    conf = settings.to_conf()
    assert "occurred_at_in_future" not in conf["exactly_once.topics.orders.rules"]  # derived
    later = Settings.from_conf((conf | {"exactly_once.topics.orders.max_clock_skew": "1 hour"}).get)
    assert later.topic("orders").rules["occurred_at_in_future"].endswith("INTERVAL 1 hour")
    none = Settings.from_conf((conf | {"exactly_once.topics.orders.max_clock_skew": ""}).get)
    assert "occurred_at_in_future" not in none.topic("orders").rules


def test_quality_tables_come_from_base_with_the_target_merged_over(tmp_path: Path):
    conf = tmp_path / "conf"
    (conf / "targets").mkdir(parents=True)
    (conf / "base.yml").write_text(Path("conf/base.yml").read_text())
    (conf / "targets" / "x.yml").write_text(
        "quality:\n  tables:\n    orders:\n      unique: [order_id, customer_id]\n")
    (conf / "targets" / "plain.yml").write_text("")
    quality = load_quality("x", conf_dir=conf)
    assert quality == load_quality("plain", conf_dir=conf) | {"orders": TableQuality(
        **{**vars(quality["orders"]), "unique": ("order_id", "customer_id")})}
    assert quality["orders"].ranges == {"amount": {"min": 0}}  # untouched base value
    assert quality["orders"].parameter == "silver_orders_distinct_order_id"
    assert quality["silver_orders"].topic == "orders" and quality["silver_orders"].parameter is None


@pytest.mark.parametrize("override, message", [
    ("quality:\n  tables:\n    orders:\n      uniqe: [order_id]\n",
     r"quality.tables.orders has unknown keys \['uniqe'\]"),
    ("quality:\n  tables:\n    silver_orders:\n      keys_at_most_in: {key: order_id}\n",
     "quality.tables.silver_orders.keys_at_most_in needs `table` and `key`"),
    ("quality:\n  tables: {}\n", None),
])
def test_bad_quality_tables_fail_naming_the_table(tmp_path: Path, override, message):
    conf = tmp_path / "conf"
    (conf / "targets").mkdir(parents=True)
    base = Path("conf/base.yml").read_text()
    if message is None:  # no tables at all, in base or target
        base, message = base[:base.index("\nquality:")] + "\n", "conf has no quality.tables"
    (conf / "base.yml").write_text(base)
    (conf / "targets" / "x.yml").write_text(override)
    with pytest.raises(SettingsError, match=message):
        load_quality("x", conf_dir=conf)
    with pytest.raises(SettingsError, match="unknown target 'staging'"):
        load_quality("staging", conf_dir=conf)
