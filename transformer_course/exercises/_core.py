"""The shared machinery of every checker: run a check, turn the outcome into one line of feedback.

Feedback comes in the learner's language: English by default, Chinese after ``set_language("zh")`` (the setup
cell of each Chinese notebook calls it). A checker writes each message in both, ``tr("English", "中文")``, and
names its exercise once, at import, with :class:`Exercise`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import torch

from transformer_course.language import LANGUAGES, get_language, tr


def _then(what: str) -> str:
    """``what`` followed by the Chinese that comes after it: a space only after Latin text or code."""
    return f"{what} " if what and what[-1].isascii() else what


@dataclass(frozen=True)
class Exercise:
    """One exercise's number ("4.1") and short title in English and Chinese; creating one registers it, so a
    stored English feedback line can be rendered in Chinese (:func:`translate_feedback`)."""

    number: str
    title: str
    title_zh: str

    def __post_init__(self) -> None:
        if not re.fullmatch(r"\d+\.\d+", self.number):
            raise ValueError(f"an exercise number looks like '4.1', got {self.number!r}")
        known = EXERCISES.get(self.number)
        if known is not None and known != self:
            raise ValueError(f"exercise {self.number} is registered already, as {known.title!r}")
        EXERCISES[self.number] = self

    def label(self, language: str | None = None) -> str:
        """ "Exercise 4.1 (attention from scratch)" or "练习 4.1（从零实现注意力）"."""
        if (language or get_language()) == "zh":
            return f"练习 {self.number}（{self.title_zh}）"
        return f"Exercise {self.number} ({self.title})"


EXERCISES: dict[str, Exercise] = {}


class ExerciseMistake(AssertionError):
    """Raised by a check when the reader's answer is wrong; its message tells the reader what to look at."""


def expect(condition: bool, message: str) -> None:
    """Fail the check with ``message`` unless ``condition`` holds."""
    if not condition:
        raise ExerciseMistake(message)


def expect_tensor(actual: object, what: str, shape: tuple[int, ...] | torch.Size, meaning: str = "") -> None:
    """Fail unless ``actual`` is a tensor of ``shape``. ``meaning`` follows the expected shape in the message,
    for instance the names of the axes: "(batch, heads, len, d_k)"."""
    got = type(actual).__name__
    expect(
        isinstance(actual, torch.Tensor),
        tr(f"{what} should be a torch.Tensor, got {got}", f"{_then(what)}应是 torch.Tensor，得到的是 {got}"),
    )
    assert isinstance(actual, torch.Tensor)
    gap = "" if meaning.startswith("（") else " "
    expected = f"{tuple(shape)}{gap}{meaning}" if meaning else f"{tuple(shape)}"
    actual_shape = tuple(actual.shape)
    expect(
        actual_shape == tuple(shape),
        tr(
            f"{what} has shape {actual_shape}, expected {expected}",
            f"{_then(what)}的形状是 {actual_shape}，应为 {expected}",
        ),
    )


def expect_close(actual: object, expected: torch.Tensor, what: str, atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """Fail unless ``actual`` is a tensor of ``expected``'s shape whose values are close to it."""
    expect_tensor(actual, what, expected.shape)
    assert isinstance(actual, torch.Tensor)
    actual_f, expected_f = actual.detach().double(), expected.detach().double()
    if not torch.allclose(actual_f, expected_f, atol=atol, rtol=rtol, equal_nan=False):
        worst = (actual_f - expected_f).abs().nan_to_num(float("inf")).max().item()
        raise ExerciseMistake(
            tr(
                f"{what} differs from the expected values (largest difference {worst:.3g})",
                f"{_then(what)}与正确结果不同（最大差 {worst:.3g}）",
            )
        )


def as_sentence(message: str) -> str:
    """``message`` as a sentence: a capital first letter (unless it starts with code, such as ``k_cache`` or
    ``fn(...)``) and a full stop at the end; in Chinese, a "。" unless it ends with punctuation already."""
    if get_language() == "zh":
        return message if not message or message[-1] in "。！？" else message + "。"
    first = message.split(" ", 1)[0].rstrip(",;:")
    if first.isalpha() and first.islower():
        message = message[0].upper() + message[1:]
    if message and message[-1] not in ".!?":
        message += "."
    return message


_SIZE_MISMATCH = re.compile(
    r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton dimension (-?\d+)"
)
_MATMUL_MISMATCH = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+x\d+) and (\d+x\d+)\)")
_BATCHED_MATMUL_MISMATCH = re.compile(
    r"Expected size for first two dimensions of batch2 tensor to be: (\[[^\]]*\]) but got: (\[[^\]]*\])"
)
_NOT_CONTIGUOUS = re.compile(r"view size is not compatible with input tensor's size and stride")
_BAD_VIEW = re.compile(r"shape '(\[[^\]]*\])' is invalid for input of size (\d+)")
_BAD_INDEX_PUT = re.compile(
    r"shape mismatch: value tensor of shape (\[[^\]]*\]) cannot be broadcast to indexing result of shape (\[[^\]]*\])"
)
_BAD_CAT = re.compile(
    r"Sizes of tensors must match except in dimension (-?\d+)\. Expected size (\d+) but got size (\d+) "
    r"for tensor number (\d+)"
)


def mismatched_sizes(error: BaseException) -> tuple[int, int] | None:
    """The two sizes in PyTorch's broadcasting error ("The size of tensor a (8) must match the size of tensor b
    (2) ..."), or None for any other error."""
    match = _SIZE_MISMATCH.search(str(error))
    return (int(match[1]), int(match[2])) if match else None


def explain_shape_error(error: BaseException) -> str:
    """PyTorch's commonest shape errors said in Chinese (broadcasting, matrix product, batched matrix product, view,
    a view of a tensor that is not contiguous, concatenation, assignment through an index); any other error's own
    text."""
    text = str(error)
    if match := _SIZE_MISMATCH.search(text):
        return f"两个张量在 dim={match[3]} 上的大小不一致，分别为 {match[1]} 和 {match[2]}，无法广播"
    if match := _MATMUL_MISMATCH.search(text):
        return f"矩阵乘法的形状 {match[1]} 与 {match[2]} 对不上：前者的列数应等于后者的行数"
    if match := _BATCHED_MATMUL_MISMATCH.search(text):
        return (
            f"批量矩阵乘法的形状对不上：把前面的维度合并成一个批次维后，第二个张量的前两维应为 {match[1]}，"
            f"实际是 {match[2]}（它的倒数第二维要等于第一个张量的最后一维）"
        )
    if _NOT_CONTIGUOUS.search(text):
        return (
            "张量在内存中不再连续（例如在 permute 或 transpose 之后），不能直接用 .view 改变形状："
            "改用 .reshape(...)，或先调用 .contiguous()"
        )
    if match := _BAD_VIEW.search(text):
        return f"{match[2]} 个元素排不成形状 {match[1]}"
    if match := _BAD_INDEX_PUT.search(text):
        return f"赋给索引位置的值的形状是 {match[1]}，无法广播到索引选中部分的形状 {match[2]}"
    if match := _BAD_CAT.search(text):
        return (
            f"拼接（torch.cat）要求除 dim={match[1]} 以外的各维大小都相同，"
            f"但列表中的第 {int(match[4]) + 1} 个张量在某一维上的大小是 {match[3]}，应为 {match[2]}"
        )
    return text


def is_batched_matmul_mismatch(error: BaseException) -> bool:
    """True for PyTorch's error when a batched ``a @ b`` gets a ``b`` whose rows do not match ``a``'s columns."""
    return _BATCHED_MATMUL_MISMATCH.search(str(error)) is not None


def is_view_of_non_contiguous(error: BaseException) -> bool:
    """True for PyTorch's error when ``.view`` is called on a tensor that permute or transpose left non-contiguous."""
    return _NOT_CONTIGUOUS.search(str(error)) is not None


def is_index_assignment_mismatch(error: BaseException) -> bool:
    """True for PyTorch's error when ``t[index] = value`` gets a value whose shape does not fit what index selects."""
    return _BAD_INDEX_PUT.search(str(error)) is not None


def crash_hint(error: BaseException, sizes: tuple[int, int], en: str, zh: str) -> ExerciseMistake | None:
    """A mistake with a hint when ``error`` is a broadcasting error between exactly the two sizes the likeliest
    slip produces (in either order), else None. ``sizes`` are those two sizes; ``en``/``zh`` the hint."""
    found = mismatched_sizes(error)
    if found is None or sorted(found) != sorted(sizes):
        return None
    return ExerciseMistake(
        tr(
            f"your code raised {type(error).__name__}: {error}. {en}",
            f"你的代码出错了：{explain_shape_error(error)}。{zh}",
        )
    )


def report(exercise: Exercise | str, check: Callable[[], None]) -> bool:
    """Run ``check`` and print one line: correct, not attempted yet, or what went wrong. Returns True if correct."""
    label = exercise.label() if isinstance(exercise, Exercise) else exercise
    zh = get_language() == "zh"
    try:
        check()
    except NotImplementedError:
        if zh:
            print(f"{label}：尚未作答——把 `raise NotImplementedError` 换成你的代码。")
        else:
            print(f"{label}: not attempted yet - replace the `raise NotImplementedError` with your code.")
        return False
    except ExerciseMistake as mistake:
        message = as_sentence(str(mistake))
        print(f"{label}：还不对。{message}" if zh else f"{label}: not yet. {message}")
        return False
    except Exception as error:  # the reader's code crashed: show it as feedback, not as a traceback
        name = type(error).__name__
        if zh:
            explained = explain_shape_error(error)
            said = f"你的代码出错了：{explained}。" if explained != str(error) else f"你的代码抛出了 {name}: {error}"
            print(f"{label}：{said}")
        else:
            print(f"{label}: your code raised {name}: {error}")
        return False
    print(f"{label}：正确！" if zh else f"{label}: correct!")
    return True


_NOT_ATTEMPTED = re.compile(
    r"^Exercise (?P<number>\d+\.\d+) \(.*\): "
    r"not attempted yet - replace the `raise NotImplementedError` with your code\.$"
)


def translate_feedback(line: str, language: str) -> str:
    """A stored English "not attempted yet" line (what a committed notebook shows under each exercise) in
    ``language``; any other line comes back unchanged. The exercise must be registered (its module imported)."""
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    match = _NOT_ATTEMPTED.match(line)
    if language == "en" or match is None:
        return line
    exercise = EXERCISES.get(match["number"])
    if exercise is None:
        raise ValueError(f"exercise {match['number']} is not registered: import its checker module first")
    return f"{exercise.label('zh')}：尚未作答——把 `raise NotImplementedError` 换成你的代码。"
