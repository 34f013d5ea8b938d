"""The one strict JSONL reader (lead_recipes/jsonl.py) used by replay, data and evaluation."""

import json

import pytest

from lead_recipes.jsonl import parse_jsonl, read_jsonl


def test_a_malformed_line_is_an_error_naming_file_and_line(tmp_path):
    p = tmp_path / "rows.jsonl"
    p.write_text('{"a": 1}\n\n{"a": 2\n{"a": 3}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"rows\.jsonl:3: invalid JSON"):
        read_jsonl(p)


def test_blank_lines_and_crlf_are_skipped_not_rows(tmp_path):
    p = tmp_path / "rows.jsonl"
    p.write_bytes(b'{"a": 1}\r\n\r\n  \n{"a": 2}\r\n')
    assert read_jsonl(p) == [{"a": 1}, {"a": 2}]


def test_a_raw_line_separator_inside_a_string_stays_in_its_row():
    row = {"problem": "x\u2028y\u0085z"}
    text = json.dumps(row, ensure_ascii=False) + "\n"
    assert parse_jsonl(text, "mem") == [row]
