"""The assignments' keys and rubrics are teacher material (teacher/), kept out of every public file, and every brief
the public guide gives has its key and rubric there.

Public files are the ones students are pointed at: the instructor guide and the other pages of docs/, the READMEs, the
site's pages, the notebooks (English and Chinese) and the installed package. A key "leaks" if one of its sentences
(text of a key section after its question, whitespace aside) or its marker appears in one of them.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
TEACHER = ROOT / "teacher"
GUIDES = {"en": ROOT / "docs" / "instructor_guide.md", "zh": ROOT / "docs" / "instructor_guide.zh-CN.md"}
KEYS = {
    "en": (TEACHER / "assignments.md", TEACHER / "mini_project.md"),
    "zh": (TEACHER / "assignments.zh-CN.md", TEACHER / "mini_project.zh-CN.md"),
}
MARKER = "teacher-key"
# "### A1.2 (3 points)" / "### A1.2（3 分）"; the mini-project's parts are P.1, P.2, ...
KEY_HEADING = re.compile(r"^### ((?:A\d|P)\.\d+) ?[(（](\d+) (?:points?|分)[)）]\s*$", re.MULTILINE)
# the guide's briefs: "### A4 (week 4; ...)" or "### Mini-project ..." then "1. (3 points) ..." / "1. （3 分）..."
BRIEF_HEADING = re.compile(r"^### (A\d|Mini-project|小项目)\b", re.MULTILINE)
BRIEF_ITEM = re.compile(r"^(\d+)\. ?[(（](\d+) (?:points?|分)[)）]", re.MULTILINE)
QUESTION = {"en": "**Question.**", "zh": "**题目。**"}
ANSWER = {"en": ("**Answer.**",), "zh": ("**答案。**",)}
SPLIT = {"en": ("**Points.**", "**Rubric.**"), "zh": ("**给分。**", "**评分标准。**")}
# a sentence long enough to be the key's own words, not a phrase any text could share
SENTENCE_END = {"en": re.compile(r"(?<=[.;!?])\s+"), "zh": re.compile(r"(?<=[。；！？])")}
MIN_CHARS = {"en": 50, "zh": 20}
# Facts only a key gives (numbers, formulas), the same in both languages: the guide held all of them before the keys
# moved to teacher/, and no public file may hold them again.
KEY_FACTS = {
    "A1.1": ("0.9617", "1.0398"),
    "A1.2": ("1.8418", "1.005"),
    "A1.3": (r"1 + 4 \cdot 1023 = 4093 < 4096", r"1 + 2 \cdot 513 = 1027"),
    "A2.1": ("4,080,185.1", "544.1"),
    "A2.2": (r"\sum_i \cos(\omega_i (j - i + 2))",),
    "A3.1": (r"N_d(8d^2 + 8d + 2 d\, d_{ff} + d_{ff} + d + 6d)", "223,083,776", "9,428,800"),
    "A3.2": (r"1.3 \times 10^{-57}", r"9.3 \times 10^{-10}"),
    "A4.1": (r"$\prod_t p_t$",),
    "A5.1": ("0.3125 MiB",),
    "A5.3": ("$1/(i+1)$",),
    "A6.2": ("0.863", "-0.400"),
}


def _flat(text: str) -> str:
    return " ".join(text.split())


def key_sections(path: Path) -> dict[str, tuple[int, str]]:
    """Key id ("A1.2", "P.3") -> (its points, the text of its section)."""
    text = path.read_text(encoding="utf-8")
    heads = list(KEY_HEADING.finditer(text))
    sections = {}
    for k, head in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        body = text[head.end() : end].split("\n## ", 1)[0]
        sections[head.group(1)] = (int(head.group(2)), body)
    return sections


def key_sentences(language: str) -> list[tuple[str, str]]:
    """(key id, sentence) for every sentence of every key after its question, in ``language``'s teacher files."""
    found = []
    for path in KEYS[language]:
        for key, (_, body) in key_sections(path).items():
            after = body.split(QUESTION[language], 1)[-1].split("\n\n", 1)[-1]
            for sentence in SENTENCE_END[language].split(_flat(after)):
                if len(sentence) >= MIN_CHARS[language] and MARKER not in sentence:
                    found.append((key, sentence))
    return found


def briefs(language: str) -> dict[str, int]:
    """Brief item id ("A1.2", "P.3") -> its points, from section 6 of the public guide."""
    text = GUIDES[language].read_text(encoding="utf-8")
    section = re.split(r"^## 6\.", text, flags=re.MULTILINE)[1]
    section = re.split(r"^## 7\.", section, flags=re.MULTILINE)[0]
    heads = list(BRIEF_HEADING.finditer(section))
    items = {}
    for k, head in enumerate(heads):
        body = section[head.end() : heads[k + 1].start() if k + 1 < len(heads) else len(section)]
        name = head.group(1) if head.group(1).startswith("A") else "P"
        for item in BRIEF_ITEM.finditer(body):
            items[f"{name}.{item.group(1)}"] = int(item.group(2))
    return items


def _public_texts() -> dict[str, str]:
    """Every public file's text, by path: docs/, the READMEs, the site's pages, the notebooks' cells (English and
    Chinese) and every text file of the installed package."""
    paths = [*ROOT.glob("docs/**/*.md"), *ROOT.glob("README*.md"), *ROOT.glob("site/*.md"), *ROOT.glob("site/*.yml")]
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in paths}
    for path in ROOT.glob("notebooks/**/*.ipynb"):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        texts[str(path.relative_to(ROOT))] = "\n".join("".join(c["source"]) for c in cells)
    for path in (ROOT / "transformer_course").rglob("*"):
        if path.is_file() and path.suffix in {".py", ".md", ".json", ".txt", ".yml", ".yaml", ".toml", ".cfg"}:
            texts[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8", errors="replace")
    return {name: _flat(text) for name, text in texts.items()}


@pytest.fixture(scope="module")
def public_texts() -> dict[str, str]:
    return _public_texts()


@pytest.mark.parametrize("language", sorted(KEYS))
def test_no_public_file_holds_a_key(language, public_texts):
    sentences = key_sentences(language)
    assert len(sentences) > 50, f"found only {len(sentences)} key sentences in the {language} teacher files"
    leaks = [(key, name) for key, sentence in sentences for name, text in public_texts.items() if sentence in text]
    assert not leaks, f"key sentences found in public files: {leaks[:10]}"
    markers = [name for name, text in public_texts.items() if MARKER in text]
    assert not markers, f"a key's marker ({MARKER}) is in public files: {markers}"


def test_the_keys_facts_are_in_the_keys_and_in_no_public_file(public_texts):
    for assignments, _ in KEYS.values():
        keys = {key: _flat(body) for key, (_, body) in key_sections(assignments).items()}
        missing = [(key, fact) for key, facts in KEY_FACTS.items() for fact in facts if fact not in keys[key]]
        assert not missing, f"{assignments.name} no longer gives {missing}"
    facts = [fact for group in KEY_FACTS.values() for fact in group]
    leaks = [(fact, name) for fact in facts for name, text in public_texts.items() if fact in text]
    assert not leaks, f"key facts found in public files: {leaks[:10]}"


@pytest.mark.parametrize("language", sorted(KEYS))
def test_every_key_is_marked_and_has_an_answer_and_its_points(language):
    for path in KEYS[language]:
        sections = key_sections(path)
        assert sections, f"{path.name} has no key sections"
        for key, (_, body) in sections.items():
            assert f"<!-- {MARKER} {key} -->" in body, f"{path.name}: {key} has no marker"
            assert QUESTION[language] in body, f"{path.name}: {key} does not repeat its question"
            if key.startswith("A"):
                assert any(a in body for a in ANSWER[language]), f"{path.name}: {key} has no answer"
            assert any(s in body for s in SPLIT[language]), f"{path.name}: {key} does not split its points"


@pytest.mark.parametrize("language", sorted(KEYS))
def test_every_brief_of_the_guide_has_its_key_and_rubric(language):
    given = briefs(language)
    keyed = {key: points for path in KEYS[language] for key, (points, _) in key_sections(path).items()}
    assert {f"A{n}" for n in range(1, 8)} | {"P"} <= {item.split(".")[0] for item in given}
    assert given == keyed, (
        f"briefs without a key: {sorted(set(given) - set(keyed))}; keys without a brief: "
        f"{sorted(set(keyed) - set(given))}; points that differ: "
        f"{sorted(k for k in set(given) & set(keyed) if given[k] != keyed[k])}"
    )
    for assignment in {item.split(".")[0] for item in given}:
        points = sum(p for item, p in given.items() if item.split(".")[0] == assignment)
        assert points == (20 if assignment == "P" else 10), f"{assignment} is worth {points} points"


def test_the_two_languages_have_the_same_keys():
    for english, chinese in zip(KEYS["en"], KEYS["zh"]):
        en, zh = key_sections(english), key_sections(chinese)
        assert {k: p for k, (p, _) in en.items()} == {k: p for k, (p, _) in zh.items()}, chinese.name


def test_the_public_guide_keeps_no_answers_in_its_briefs():
    for language, words in {"en": ("*Answer:*", "*Rubric:*", "Points: 1"), "zh": ("*答案：*", "*评分标准：*")}.items():
        text = GUIDES[language].read_text(encoding="utf-8")
        section = re.split(r"^## 6\.", text, flags=re.MULTILINE)[1]
        section = re.split(r"^## 7\.", section, flags=re.MULTILINE)[0]
        assert not [w for w in words if w in section], f"the {language} guide's briefs hold an answer or a rubric"


def test_teacher_material_is_neither_on_the_site_nor_in_the_package():
    toc = yaml.safe_load((ROOT / "site" / "_toc.yml").read_text(encoding="utf-8"))
    files = [chapter["file"] for part in toc["parts"] for chapter in part["chapters"]]
    assert not [f for f in files if f.startswith("teacher")], "the site's table of contents lists teacher material"
    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^include = \["transformer_course\*"\]$', project, re.MULTILINE), "the package includes more"
    assert not (ROOT / "transformer_course" / "teacher").exists()
    readme = (TEACHER / "README.md").read_text(encoding="utf-8")
    assert "repository is public" in readme, "teacher/README.md must say the keys are readable in the repository"


def _blocks_layers(n: int, kernel: int, block: int) -> int:
    """The fewest causal convolution layers, dilations 1, 2, 4, ... repeated in blocks of ``block``, that connect
    position 1 to position n."""
    layers, dilations = 0, 0
    while 1 + (kernel - 1) * dilations < n:
        dilations += 2 ** (layers % block)
        layers += 1
    return layers


def test_the_keys_exact_numbers():
    """The answers that are exact, recomputed: A1.1, A1.3 (and its variants), A2.1, A3.1, A3.2's predictions, A5.1
    (and its Mistral variant)."""
    import torch

    from transformer_course import Transformer, TransformerConfig, count_parameters
    from transformer_course.efficient.kv_cache import PUBLISHED_DECODERS, kv_cache_bytes

    key = {k: _flat(body) for path in KEYS["en"] for k, (_, body) in key_sections(path).items()}
    everything = _flat((TEACHER / "assignments.md").read_text(encoding="utf-8"))  # the variants too
    assert f"{10 ** (-1 / 59):.4f} \\le \\text{{scale}} \\le {10 ** (1 / 59):.4f}" in key["A1.1"]
    assert (_blocks_layers(4096, 2, 10), _blocks_layers(1024, 3, 4)) == (42, 138)
    assert "**42 layers**" in key["A1.3"] and "**138 layers**" in key["A1.3"]
    assert _blocks_layers(1024, 3, 30) == 10 and "need 10 (01's table)" in key["A1.3"]  # doubling: 01's table
    assert _blocks_layers(4096, 2, 10) - 2 == 40 and 1 + 4 * 1023 < 4096 <= 1 + 4 * 1023 + 3
    for n, kernel, block, layers in ((1024, 2, 10, 10), (2048, 2, 10, 21), (512, 3, 4, 69), (1024, 3, 5, 85)):
        assert _blocks_layers(n, kernel, block) == layers, (n, kernel, block)
        assert f"{layers}" in everything
    for base in (100, 10**4, 10**6):
        assert f"{2 * math.pi * base ** (62 / 64):,.1f}" in key["A2.1"]
    slow = {base: sum(50 * base ** (-2 * i / 64) < 1 for i in range(32)) for base in (100, 10**4, 10**6)}
    assert f"{slow[10**6]} of the 32 pairs" in key["A2.1"]
    assert f"({slow[10**4]} with $10^4$, {slow[100]} with 100)" in key["A2.1"]
    for vocab, width, d_ff, layers in ((32000, 768, 3072, 12), (8000, 256, 1024, 4)):
        with torch.device("meta"):  # the shapes only: no memory for 223 million parameters
            model = Transformer(
                TransformerConfig(
                    src_vocab_size=vocab,
                    tgt_vocab_size=vocab,
                    d_model=width,
                    num_heads=4,
                    d_ff=d_ff,
                    num_encoder_layers=layers,
                    num_decoder_layers=layers,
                    share_embeddings=True,
                    tie_output=True,
                )
            )
        count = count_parameters(model)
        assert f"{count:,} parameters" in key["A3.1"] or f"{count:,}, of which" in key["A3.1"], count
        assert f"({vocab * width:,}) is {vocab * width / count:.1%}" in key["A3.1"] or (
            f"($Vd$ = {vocab * width:,}) is {vocab * width / count:.1%}" in key["A3.1"]
        ), (vocab, width)
    for depth, residual, plain in ((16, 1.58, 9.3e-10), (64, 1.63, 1.3e-57)):
        assert f"{(1 + 1 / depth) ** ((depth - 1) / 2):.2f}" == f"{residual:.2f}"
        assert f"{depth ** (-(depth - 1) / 2):.1e}" == f"{plain:.1e}"
        assert f"{residual:.2f} at depth {depth}" in key["A3.2"]
        mantissa, exponent = f"{plain:.1e}".split("e")
        assert f"{mantissa} \\times 10^{{{int(exponent)}}}" in key["A3.2"]
    assert f"\\sqrt{{e}} \\approx {math.sqrt(math.e):.2f}" in key["A3.2"]
    for name in ("Llama-2-7B", "Llama-2-70B", "Mistral-7B"):
        shape = PUBLISHED_DECODERS[name]
        per_token = kv_cache_bytes(shape.num_layers, shape.num_kv_heads, shape.head_dim, 1)
        assert f"{per_token:,} bytes per token" in everything, name


def _key(key_id: str) -> str:
    return next(_flat(body) for path in KEYS["en"] for k, (_, body) in key_sections(path).items() if k == key_id)


def test_a1_2_the_crossing_of_01s_tanh_rnn():
    """A1.2's numbers come from 01's probe (seeded, float64): the scale where the gradient from 60 steps back equals
    the one from 1 step back, and the mean and root-mean-square slopes there."""
    import torch

    from transformer_course.prelude.rnn import (
        RNNCell,
        chain_jacobians,
        rnn_step_jacobians,
        scaled_recurrent_weight,
        spectral_norms,
    )

    generator = torch.Generator().manual_seed(0)  # 01's section 3: T = 60 steps, 32 units, 8 inputs
    x = torch.randn(1, 60, 8, generator=generator, dtype=torch.float64)
    rotation = scaled_recurrent_weight(32, 1.0, generator).double()
    u = torch.randn(32, 8, generator=generator, dtype=torch.float64) / math.sqrt(8)

    def decay(scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        cell = RNNCell(8, 32, "tanh").double()
        with torch.no_grad():
            cell.weight_hh.copy_(rotation * scale)
            cell.weight_ih.copy_(u)
            cell.bias_ih.zero_()
            cell.bias_hh.zero_()
        states, jacobians = rnn_step_jacobians(cell, x)
        return spectral_norms(chain_jacobians(jacobians))[0].flip(0), states[0]

    low, high = 1.5, 2.0
    for _ in range(30):
        middle = (low + high) / 2
        norms, _ = decay(middle)
        low, high = (middle, high) if norms[60] < norms[1] else (low, middle)
    norms, states = decay(low)
    slopes = 1 - states**2
    mean, rms = slopes.mean().item(), slopes.pow(2).mean().sqrt().item()
    key = _key("A1.2")
    assert f"crossing at {low:.4f}" in key
    assert f"mean {mean:.3f} and the root-mean-square {rms:.3f}" in key
    assert f"mean slope is {low * mean:.3f}" in key and f"root-mean-square slope is {low * rms:.3f}" in key
    assert f"{low * mean:.3f}^{{59}} \\approx {(low * mean) ** 59:.0e}".replace("e-0", " \\times 10^{-") in key
    assert f"({(states.abs() > 0.9).double().mean().item():.0%} of the units" in key
    for scale, ratio in ((1.8, "0.41"), (1.85, "2.75"), (1.9, "6.85")):
        norms, _ = decay(scale)
        assert f"{(norms[60] / norms[1]).item():.2f}" == ratio, scale
        assert f"{ratio} at" in key, scale


def test_a2_3_which_positions_change():
    """A2.3: two attention layers over [pad, pad, 7, 8] with the causal and padding masks; the last token's input
    changes. Which positions of layer 2 change does not depend on the weights."""
    import torch
    from torch import nn

    from transformer_course import causal_mask, padding_mask
    from transformer_course.core.attention import scaled_dot_product_attention

    ids = torch.tensor([[0, 0, 7, 8]])
    mask = padding_mask(ids, 0) & causal_mask(4)
    assert (~mask.any(-1)).nonzero()[:, -1].tolist() == [0, 1]  # the two pads' rows see nothing
    assert (padding_mask(torch.tensor([[7, 8, 0, 0]]), 0) & causal_mask(4)).any(-1).all()  # right padding: none

    def changed(fill: float | str, seed: int) -> list[str]:
        torch.manual_seed(seed)
        layers = [[nn.Linear(8, 8) for _ in range(3)] for _ in range(2)]
        x = torch.randn(1, 1, 4, 8)
        y = x.clone()
        y[0, 0, 3] += 1.0
        outputs = []
        with torch.no_grad():
            for h in (x, y):
                for w_q, w_k, w_v in layers:
                    q, k, v = w_q(h), w_k(h), w_v(h)
                    if fill == "package":
                        h = scaled_dot_product_attention(q, k, v, mask)[0]
                    else:
                        scores = q @ k.transpose(-2, -1) / math.sqrt(8)
                        h = scores.masked_fill(~mask, fill).softmax(-1) @ v
                outputs.append(h[0, 0])
        difference = (outputs[0] - outputs[1]).abs().amax(-1)
        return ["nan" if d.isnan() else "changed" if d > 0 else "same" for d in difference]

    for seed in (0, 1, 2):
        assert changed(-1e9, seed) == ["changed", "changed", "same", "changed"]
        assert changed("package", seed) == ["same", "same", "same", "changed"]
        assert changed(float("-inf"), seed) == ["nan"] * 4
    key = _key("A2.3")
    assert "positions 0 and 1 (the two pads) and 3" in key and "With the package only position 3 changes" in key
    assert "every position is NaN after layer 2, token 7 included" in key


def test_a3_2_the_measured_gradients():
    """A3.2's measurements: 07's stacks with Exercise 7.2's initialisation (the reference), seed 0."""
    import torch
    from torch import nn

    from transformer_course import FeedForward
    from transformer_course.exercises.feed_forward_norm import init_residual_branch_reference

    def gradient_at_layer_0(depth: int, residual: bool) -> float:
        torch.manual_seed(0)  # 07's stack_gradients, with init_residual_branch_ for every block
        blocks = nn.ModuleList(FeedForward(32, 128) for _ in range(depth))
        for block in blocks:
            init_residual_branch_reference(block, depth)
        x, readout = torch.randn(64, 32), torch.randn(32)
        for block in blocks:
            x = x + block(x) if residual else block(x)
        (x @ readout).mean().backward()
        return blocks[0].linear1.weight.grad.double().norm().item()

    key = _key("A3.2")
    said = re.search(r"is ([\d.]+) at depth 16 and ([\d.]+) at depth 64 for the residual", key)
    assert said, "A3.2 no longer gives the residual stack's measurements"
    for depth, value in zip((16, 64), map(float, said.groups())):
        assert math.isclose(gradient_at_layer_0(depth, True), value, rel_tol=0.1), depth
    plain_16 = re.search(r"and ([\d.e-]+) at depth 16 and exactly 0 at depth 64", key)
    assert plain_16 and math.isclose(gradient_at_layer_0(16, False), float(plain_16[1]), rel_tol=0.1)
    assert gradient_at_layer_0(64, False) < 1e-40  # an exact 0 in float32, or a flushed subnormal


def test_the_public_guides_do_not_link_to_the_keys():
    """The guide, a page students read, names the teacher material without a link that opens it."""
    for language, path in GUIDES.items():
        text = path.read_text(encoding="utf-8")
        links = re.findall(r"\]\(([^)]*teacher[^)]*)\)", text)
        assert not links, f"the {language} guide links to teacher material: {links}"
        assert "teacher/" in text, f"the {language} guide no longer says where the teacher material is"
