from pathlib import Path

import pytest

from exactly_once.config import Settings, SettingsError, load_settings


def test_local_settings_round_trip_through_spark_conf_keys():
    settings = load_settings("local")
    conf = settings.to_conf()
    assert Settings.from_conf(conf.get) == settings
    assert conf["exactly_once.topics.orders.key"] == "order_id"
    assert settings.topic("orders").sequence_by == ("sequence", "event_id")
    assert "has_event_id" in settings.topic("player_rewards").rules


@pytest.mark.parametrize("key, value, message", [
    ("exactly_once.kafka.bootstrap_servers", "", "exactly_once.kafka.bootstrap_servers is missing"),
    ("exactly_once.topics.orders.watermark_delay", "soon",
     "exactly_once.topics.orders.watermark_delay must look like"),
    ("exactly_once.kafka.max_offsets_per_trigger", "many",
     "exactly_once.kafka.max_offsets_per_trigger must be an integer"),
    ("exactly_once.kafka.fail_on_data_loss", "maybe",
     "exactly_once.kafka.fail_on_data_loss must be true or false"),
    ("exactly_once.topics.orders.rules", "[1, 2]", "exactly_once.topics.orders.rules must map"),
    ("exactly_once.source", "s3://bucket", "exactly_once.source must be"),
])
def test_a_bad_setting_fails_naming_its_key(key, value, message):
    conf = load_settings("local").to_conf() | {key: value}
    with pytest.raises(SettingsError, match=message):
        Settings.from_conf(conf.get)


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
