"""The decoder's linear kernel is decided once at load and named in provenance: a run made with
oneDNN-packed weights (logits move by float32 rounding) never shares a provenance id with one made
on torch's default kernel, so two runs whose numbers differ in the last bits are told apart."""

import pytest

from tamperbench.models import load_backend
from tamperbench.models.decoding.packed_linear import packed_linears_for

pytestmark = pytest.mark.model


def test_packed_kernel_is_named_and_switch_off_changes_the_id(embedded_backend, monkeypatch):
    on = embedded_backend.provenance
    expected = "onednn-packed" if packed_linears_for(embedded_backend.model) is not None else None
    assert on.linear_kernel == expected
    monkeypatch.setenv("TAMPERBENCH_PACKED_LINEAR", "0")
    off = load_backend("embedded", device="cpu").provenance
    assert off.linear_kernel is None
    assert "linear_kernel" not in off.model_dump(exclude_none=True)
    if expected is not None:
        assert off.id != on.id
        assert off.model_copy(update={"linear_kernel": "onednn-packed"}).id == on.id
