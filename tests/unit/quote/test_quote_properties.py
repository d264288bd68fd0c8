"""Property tests (hypothesis) for the scorer's four defining behaviours, over every item."""

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tamperbench.quote.items import PRESETS, document_for, load_items
from tamperbench.quote.normalise import normalise, strip_trailing_punct
from tamperbench.quote.scorer import score_response
from tamperbench.quote.sentences import segment
from tamperbench.reasoning import has_reasoning

ALL = [it for p in PRESETS for it in load_items(p)]
DIRTY = [it for it in ALL if it.dirty]
PAD = st.text(alphabet=" \n\t", max_size=3)


@settings(max_examples=300, deadline=None)
@given(item=st.sampled_from(ALL), data=st.data())
def test_a_whole_other_sentence_of_the_document_is_wrong_span(item, data):
    doc = document_for(item)
    others = [s.text for s in segment(doc.text, "lines" if item.unit == "line" else doc.mode) if s.text != item.gold]
    other = data.draw(st.sampled_from(others))
    assert score_response(item, other).category == "wrong_span"


@settings(max_examples=300, deadline=None)
@given(item=st.sampled_from(ALL), data=st.data(), pad=PAD)
def test_a_proper_prefix_of_the_gold_is_truncated(item, data, pad):
    k = data.draw(st.integers(min_value=1, max_value=len(item.gold) - 1))
    prefix = item.gold[:k]
    assume(prefix.strip())
    # Dropping only the final punctuation is the separate trailing_punct class.
    assume(strip_trailing_punct(normalise(prefix)) != strip_trailing_punct(normalise(item.gold)))
    assert score_response(item, pad + prefix + pad).category == "truncated"


@settings(max_examples=100, deadline=None)
@given(item=st.sampled_from(DIRTY), pad=PAD)
def test_the_gold_with_its_planted_error_fixed_is_corrected(item, pad):
    v = score_response(item, pad + item.corrected_gold + pad)
    assert v.category == "corrected" and v.sub_label == item.planted.kind


@settings(max_examples=300, deadline=None)
@given(item=st.sampled_from(ALL), text=st.text(min_size=1, max_size=200))
def test_random_text_that_is_nowhere_in_the_document_is_rewritten(item, text):
    # a reasoning trace in any known format (<think>, gpt-oss's <|channel|> ...) is stripped before
    # scoring, so text that opens one is not an answer at all (no_answer), by design
    assume(not has_reasoning(text) and "<think>" not in text and "</think>" not in text)
    a = normalise(text.strip())
    assume(a and a not in normalise(document_for(item).text))
    assume(strip_trailing_punct(a) != strip_trailing_punct(normalise(item.gold)))
    assert score_response(item, text).category == "rewritten"
