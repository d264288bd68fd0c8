import pytest

from tamperbench.errors import UserError
from tamperbench.quote.sentences import locate, segment


def test_periods_inside_tokens_do_not_end_sentences():
    segs = segment("Tessel 3.2.0 is out. Call `tidepool.read()` now. Done!")
    assert [s.text for s in segs] == ["Tessel 3.2.0 is out.", "Call `tidepool.read()` now.", "Done!"]


def test_colons_and_semicolons_do_not_end_sentences_but_line_breaks_do():
    segs = segment("Rule one: never wade alone; ever.\nA heading\nNext one.")
    assert [s.text for s in segs] == ["Rule one: never wade alone; ever.", "A heading", "Next one."]


def test_section_labels_are_not_part_of_the_sentence():
    segs = segment("4. Customer data\n\n4.3 We will not look. When we do, we log it.\n## Install")
    assert [(s.label, s.text) for s in segs] == [("4", "Customer data"), ("4.3", "We will not look."),
                                               ("4.3", "When we do, we log it."), ("##", "Install")]


def test_closing_quote_stays_with_its_sentence_and_offsets_are_exact():
    doc = '"We built it," she said. "It works."'
    segs = segment(doc)
    assert [s.text for s in segs] == ['"We built it," she said.', '"It works."']
    assert all(doc[s.start:s.end] == s.text for s in segs)


def test_lines_mode_keeps_diff_markers_and_strips_indentation():
    segs = segment("@@ -1 +1 @@\n-    old()\n+    new()\n", mode="lines")
    assert [s.text for s in segs] == ["@@ -1 +1 @@", "-    old()", "+    new()"]


def test_locators():
    segs = segment("Dear Ann,\n\nFirst one. The camera broke. Last one here.\n\nLove,\nBo")
    assert [s.text for s in locate(segs, {"kind": "keywords", "keywords": ["CAMERA"]})] == ["The camera broke."]
    assert [s.text for s in locate(segs, {"kind": "last"})] == ["Last one here."]
    assert len(locate(segs, {"kind": "keywords", "keywords": ["one"]})) == 2  # ambiguous: test must catch it
    labelled = segment("6.1 A. B.")
    assert [s.text for s in locate(labelled, {"kind": "section", "label": "6.1", "index": 2})] == ["B."]
    with pytest.raises(UserError):
        locate(segs, {"kind": "nth"})
    with pytest.raises(UserError):
        segment("x", mode="words")
