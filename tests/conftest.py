import pytest
import torch


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models run fastest, and bit-identically, on one torch thread; two threads were many times slower on a
    busy two-core machine. Test modules opt in with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _restore_environment():
    """Give every test the environment it started with: a test that sets a variable (``seed_everything`` sets
    PYTHONHASHSEED) must not change what the notebooks' kernels, started later in the same run, inherit."""
    import os

    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(autouse=True)
def _feedback_in_english():
    """Give the exercise checkers' feedback back in English after every test: a test of the Chinese feedback that
    fails half-way must not leave the next tests reading Chinese."""
    yield
    from transformer_course.language import set_language

    set_language("en")


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The whole course site (Jupyter Book and slides), built once per test session by the project's command."""
    from tools.build_site import build

    out = tmp_path_factory.mktemp("site")
    build(None, slides_only=False, annotate=False, out=out)
    return out
