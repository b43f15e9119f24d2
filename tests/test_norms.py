"""transformer_course.core.norms: LayerNorm written out, RMSNorm, and their checks."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_course.core.norms import RMSNorm, layer_norm, rms_norm


def test_layer_norm_equals_torch_with_and_without_affine():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 16) * 4 + 2
    weight, bias = torch.randn(16), torch.randn(16)
    torch.testing.assert_close(layer_norm(x, weight, bias), F.layer_norm(x, (16,), weight, bias))
    torch.testing.assert_close(layer_norm(x), F.layer_norm(x, (16,)))
    reference = nn.LayerNorm(16, eps=1e-3)
    torch.testing.assert_close(layer_norm(x, reference.weight, reference.bias, eps=1e-3), reference(x))


def test_layer_norm_output_has_zero_mean_and_unit_variance_per_position():
    torch.manual_seed(1)
    out = layer_norm(torch.randn(4, 7, 32) * 10 - 3)
    torch.testing.assert_close(out.mean(-1), torch.zeros(4, 7), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.var(-1, unbiased=False), torch.ones(4, 7), atol=1e-3, rtol=0)


def test_rms_norm_equals_torch_rms_norm():
    torch.manual_seed(2)
    x = torch.randn(2, 6, 24) * 3 + 1
    ours = RMSNorm(24, eps=1e-6)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(24))
    theirs = nn.RMSNorm(24, eps=1e-6)
    theirs.load_state_dict(ours.state_dict())
    torch.testing.assert_close(ours(x), theirs(x))


def test_rms_norm_by_formula_and_scale_invariance():
    torch.manual_seed(3)
    x = torch.randn(5, 8)
    expected = x / torch.sqrt((x**2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(rms_norm(x), expected)
    torch.testing.assert_close(rms_norm(7.0 * x, eps=1e-12), rms_norm(x, eps=1e-12))
    # unlike LayerNorm, a shift changes the result
    assert not torch.allclose(rms_norm(x + 5.0), rms_norm(x))
    # for zero-mean inputs RMSNorm and LayerNorm agree
    centred = x - x.mean(-1, keepdim=True)
    torch.testing.assert_close(rms_norm(centred, eps=1e-5), layer_norm(centred, eps=1e-5))


def test_rms_norm_module_has_one_weight_per_feature_and_keeps_shape():
    norm = RMSNorm(10)
    assert [tuple(p.shape) for p in norm.parameters()] == [(10,)]
    assert norm(torch.randn(2, 3, 10)).shape == (2, 3, 10)
    assert "10" in repr(norm)


def test_gradients_flow_through_both_norms():
    torch.manual_seed(4)
    x = torch.randn(3, 12, requires_grad=True)
    ours, theirs = RMSNorm(12), nn.RMSNorm(12, eps=1e-6)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(12))
        theirs.weight.copy_(ours.weight)
    (layer_norm(x).pow(3).sum() + ours(x).pow(3).sum()).backward()
    our_grad, x.grad = x.grad, None
    (F.layer_norm(x, (12,)).pow(3).sum() + theirs(x).pow(3).sum()).backward()
    assert torch.isfinite(our_grad).all()
    torch.testing.assert_close(our_grad, x.grad)  # the same gradient as PyTorch's norms
    torch.testing.assert_close(ours.weight.grad, theirs.weight.grad)


@pytest.mark.parametrize("eps", [0, -1e-5, "tiny"])
def test_bad_eps_is_rejected(eps):
    with pytest.raises(ValueError, match="eps must be a positive number"):
        layer_norm(torch.randn(2, 4), eps=eps)
    with pytest.raises(ValueError, match="eps must be a positive number"):
        rms_norm(torch.randn(2, 4), eps=eps)
    with pytest.raises(ValueError, match="eps must be a positive number"):
        RMSNorm(4, eps=eps)


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match=r"weight must have shape \(4,\)"):
        layer_norm(torch.randn(2, 4), weight=torch.ones(5))
    with pytest.raises(ValueError, match=r"bias must have shape \(4,\)"):
        layer_norm(torch.randn(2, 4), bias=torch.ones(3))
    with pytest.raises(ValueError, match=r"weight must have shape \(4,\)"):
        rms_norm(torch.randn(2, 4), weight=torch.ones(2, 2))
    with pytest.raises(ValueError, match="0-d tensor"):
        layer_norm(torch.tensor(1.0))
    with pytest.raises(ValueError, match="0-d tensor"):
        rms_norm(torch.tensor(1.0))
    with pytest.raises(ValueError, match=r"d_model=8"):
        RMSNorm(8)(torch.randn(2, 3, 6))
    with pytest.raises(ValueError, match="d_model must be a positive int"):
        RMSNorm(0)
