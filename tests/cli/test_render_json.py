"""``--json`` output: a large document is printed by ``json`` itself, with the same text."""

import json

from harnessctl.cli import render


def test_a_large_document_prints_the_same_text_as_rich_does(capsys, monkeypatch):
    doc = json.dumps({"calls": [{"content": "caf\u00e9 \u0085\x1b[2J", "n": i} for i in range(50)]})
    render.print_json_text(doc)
    through_rich = capsys.readouterr().out
    monkeypatch.setattr(render, "PLAIN_JSON_BYTES", 10)
    render.print_json_text(doc)
    plain = capsys.readouterr().out
    assert plain == through_rich
    assert "\\u0085" in plain and "\\u001b" in plain and "\x1b" not in plain
    assert json.loads(plain) == json.loads(doc)
