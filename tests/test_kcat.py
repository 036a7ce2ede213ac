import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly_once.kafka.kcat import (
    KafkaRecord,
    KcatFormatError,
    as_consumed,
    read_kcat_jsonl,
    to_kcat_dict,
    write_kcat_jsonl,
)

texts = st.none() | st.text()
records = st.builds(
    KafkaRecord,
    topic=st.text(min_size=1),
    key=texts,
    payload=texts,
    partition=st.none() | st.integers(0, 1000),
    offset=st.none() | st.integers(0, 2**62),
    timestamp_ms=st.none() | st.integers(0, 2**45),
    headers=st.lists(st.tuples(st.text(), texts), max_size=4).map(tuple),
)


@given(st.lists(records, max_size=20))
def test_round_trip_is_lossless(tmp_path_factory, batch):
    path = tmp_path_factory.mktemp("kcat") / "records.jsonl"
    assert write_kcat_jsonl(path, batch) == len(batch)
    assert read_kcat_jsonl(path) == batch


def test_envelope_matches_kcat_json_output():
    record = KafkaRecord("orders", "o-1", '{"a": 1}', partition=1, offset=7, timestamp_ms=99,
                         headers=(("attempt", "2"), ("trace", None)))
    assert to_kcat_dict(record) == {
        "topic": "orders", "partition": 1, "offset": 7, "tstype": "create", "ts": 99,
        "headers": ["attempt", "2", "trace", None], "key": "o-1", "payload": '{"a": 1}',
    }


def test_as_consumed_numbers_each_topic_from_zero_in_order_and_keeps_the_rest():
    records = [KafkaRecord("orders", "o-1", "a"), KafkaRecord("rewards", "p-1", "b"),
               KafkaRecord("orders", "o-1", "a", partition=3, offset=40, timestamp_ms=5),
               KafkaRecord("orders", None, None, headers=(("attempt", "2"),))]
    consumed = as_consumed(records)
    assert [(r.topic, r.partition, r.offset) for r in consumed] == [
        ("orders", 0, 0), ("rewards", 0, 0), ("orders", 0, 1), ("orders", 0, 2)]
    assert [(r.key, r.payload, r.timestamp_ms, r.headers) for r in consumed] == [
        (r.key, r.payload, r.timestamp_ms, r.headers) for r in records]


def test_reads_real_kcat_line_with_broker_field_and_no_headers(tmp_path):
    path = tmp_path / "kcat.jsonl"
    line = {"topic": "orders", "partition": 0, "offset": 3, "tstype": "create",
            "ts": 1793491200000, "broker": 1, "key": None, "payload": "x"}
    path.write_text(json.dumps(line) + "\n\n")
    assert read_kcat_jsonl(path) == [
        KafkaRecord("orders", None, "x", partition=0, offset=3, timestamp_ms=1793491200000)
    ]


@pytest.mark.parametrize("bad_line", [
    "{not json",
    '{"key": "k", "payload": "p"}',
    '{"topic": "t", "headers": ["only-a-name"]}',
    '{"topic": "t", "partition": "0"}',
    '["topic", "t"]',
])
def test_bad_line_error_names_file_and_line(tmp_path, bad_line):
    path = tmp_path / "bad.jsonl"
    good = json.dumps({"topic": "t", "key": "k", "payload": "p"})
    path.write_text(f"{good}\n{good}\n{bad_line}\n")
    with pytest.raises(KcatFormatError, match=rf"{path.name}:3: "):
        read_kcat_jsonl(path)
