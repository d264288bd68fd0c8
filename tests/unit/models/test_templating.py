"""``--chat-template`` values: none, a Jinja file (hashed), and one-line refusals (pure, no model)."""

from __future__ import annotations

import hashlib

import pytest

from tamperbench.errors import UserError
from tamperbench.models.templating import raw_prompt, resolve_chat_template


def test_model_and_none():
    assert resolve_chat_template(None).label == "model" and resolve_chat_template("model").mode == "model"
    t = resolve_chat_template("none")
    assert (t.mode, t.label, t.text) == ("none", "none", None)


def test_file_is_read_and_labelled_by_sha256_and_path(tmp_path):
    f = tmp_path / "t.jinja"
    f.write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    t = resolve_chat_template(str(f))
    assert t.mode == "file" and t.text == f.read_text()
    assert t.label == f"file:{hashlib.sha256(f.read_bytes()).hexdigest()}:{f.resolve()}"


@pytest.mark.parametrize("content, match", [
    (b"{% for m in messages %}", r"line 1: not a valid Jinja template"),
    (b"\xff\xfe bad", r"is not UTF-8 text"),
])
def test_bad_files_are_one_line(tmp_path, content, match):
    f = tmp_path / "bad.jinja"
    f.write_bytes(content)
    with pytest.raises(UserError, match=rf"^--chat-template: {f}.*{match}") as err:
        resolve_chat_template(str(f))
    assert "\n" not in str(err.value)


def test_missing_file_names_the_choices(tmp_path):
    with pytest.raises(UserError, match=r"is not 'none', 'model' or an existing Jinja template file"):
        resolve_chat_template(str(tmp_path / "nope.jinja"))


def test_raw_prompt_is_the_content_exactly():
    assert raw_prompt([{"role": "user", "content": " Why?\n"}]) == " Why?\n"
    assert raw_prompt([{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]) == "S\n\nQ"
