from __future__ import annotations

from transformer_course.exercises.introduction import check_head_dim, head_dim_reference


def test_accepts_the_reference(capsys):
    assert check_head_dim(head_dim_reference)
    assert "correct" in capsys.readouterr().out


def test_rejects_typical_mistakes(capsys):
    assert not check_head_dim(lambda c: c.d_model / c.num_heads)  # a float, not an int
    assert not check_head_dim(lambda c: c.d_model * c.num_heads)
    assert not check_head_dim(lambda c: c.d_ff // c.num_heads)
    assert "not yet" in capsys.readouterr().out


def test_a_stub_is_not_attempted(capsys):
    def stub(config):
        raise NotImplementedError

    assert not check_head_dim(stub)
    assert "not attempted yet" in capsys.readouterr().out
