/*
 * The playground of the course site: notebook 15's GPT, run in the browser by ONNX Runtime Web (WebAssembly).
 *
 * Everything it needs is in the site (tools/build_site.py writes it next to this file): ONNX Runtime Web's script,
 * its WebAssembly and the model, the latter two gzipped and base64-encoded inside classic scripts, so that the
 * page also works opened from disk (file://), where a page may neither fetch() a file nor import a module. The
 * model's graph (python -m tools.export_onnx) gives the logits and the attention weights of every layer and head.
 *
 * What the page does is the package's, written again in JavaScript and tested against it
 * (tests/test_site_browser.py): the tokenizer is transformer_course.text.bpe.BPETokenizer.encode, greedy decoding
 * and the sampling filters are transformer_course.core.decoding.generate and next_token_probs.
 */
(() => {
  "use strict";

  const files = window.coursePlaygroundFiles || {};
  const LANGUAGE = document.documentElement.lang.startsWith("zh") ? "zh" : "en";
  const TEXT = {
    en: {
      loading: "Loading the model…",
      ready: (ms) => `Ready: the model loaded in ${(ms / 1000).toFixed(1)} s, in this browser.`,
      running: (done, total) => `Generating: ${done} of ${total} tokens…`,
      done: (count, ms) => `${count} new tokens in ${(ms / 1000).toFixed(1)} s.`,
      stopped: (count) => `Stopped after ${count} new tokens.`,
      empty: "Type a prompt first.",
      failed: "The model could not start in this browser: ",
      mapShown: (shown, total) =>
        shown < total
          ? `The last ${shown} of the ${total} tokens the model read (earlier keys are not drawn).`
          : `All ${total} tokens the model read.`,
      cell: (query, key, weight) => `query ${query} → key ${key}: weight ${weight.toFixed(3)}`,
      chosen: "chosen",
      greedyNote: "greedy: the distribution at temperature 1, before any filter",
      sampleNote: "sampling: after temperature, top-k and top-p",
      off: "off",
    },
    zh: {
      loading: "正在加载模型……",
      ready: (ms) => `就绪：模型在本浏览器中加载用时 ${(ms / 1000).toFixed(1)} 秒。`,
      running: (done, total) => `正在生成：第 ${done} / ${total} 个词元……`,
      done: (count, ms) => `生成了 ${count} 个新词元，用时 ${(ms / 1000).toFixed(1)} 秒。`,
      stopped: (count) => `已停止，生成了 ${count} 个新词元。`,
      empty: "请先输入提示词。",
      failed: "模型无法在本浏览器中启动：",
      mapShown: (shown, total) =>
        shown < total
          ? `模型读入的 ${total} 个词元中的最后 ${shown} 个（更早的键没有画出）。`
          : `模型读入的全部 ${total} 个词元。`,
      cell: (query, key, weight) => `查询 ${query} → 键 ${key}：权重 ${weight.toFixed(3)}`,
      chosen: "选中",
      greedyNote: "贪心解码：温度为 1、未经任何过滤的分布",
      sampleNote: "采样：经过温度、top-k 和 top-p 之后的分布",
      off: "关",
    },
  }[LANGUAGE];
  const MAP_TOKENS = 32; // the attention map shows at most the last 32 positions, so that its labels stay legible
  const BARS = 10;

  // ---------------------------------------------------------------------------------------------------------------
  // The files: base64 of gzip, decoded and unpacked in the browser

  async function gunzipBase64(text) {
    const packed = Uint8Array.fromBase64
      ? Uint8Array.fromBase64(text)
      : Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
    const stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  function takeFile(name) {
    if (!(name in files)) throw new Error(`${name} is missing from the site (python -m tools.build_site)`);
    const content = files[name];
    delete files[name]; // the text is large: keep only what is made of it
    return content;
  }

  // ---------------------------------------------------------------------------------------------------------------
  // The tokenizer: the course's BPE (notebook 15), as BPETokenizer.encode does it

  // Python's \s (str.isspace), which the pre-tokenizer's pattern means; JavaScript's \s is another set
  const PYTHON_SPACE = "\\t-\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";

  function pythonPattern(pattern) {
    let out = "";
    let inClass = false;
    for (let i = 0; i < pattern.length; i++) {
      const c = pattern[i];
      if (c === "\\") {
        const next = pattern[++i];
        if (next === "s") out += inClass ? PYTHON_SPACE : `[${PYTHON_SPACE}]`;
        else if (next === "S" && !inClass) out += `[^${PYTHON_SPACE}]`;
        else out += c + next;
        continue;
      }
      if (c === "[") inClass = true;
      else if (c === "]") inClass = false;
      out += c;
    }
    return new RegExp(out, "gu");
  }

  class BPETokenizer {
    /** spec: the contents of tokenizer.json (BPETokenizer.to_tokenizers().to_str()). */
    constructor(spec) {
      const model = spec.model;
      this.tokens = [];
      this.ids = new Map();
      for (const [token, id] of Object.entries(model.vocab)) {
        this.tokens[id] = token;
        this.ids.set(token, id);
      }
      this.merges = model.merges.map((m) => (Array.isArray(m) ? m : m.split(" ")));
      this.ranks = new Map(); // left symbol -> (right symbol -> rank of the merge)
      this.merges.forEach(([a, b], rank) => {
        if (!this.ranks.has(a)) this.ranks.set(a, new Map());
        this.ranks.get(a).set(b, rank);
      });
      this.unk = this.ids.get(model.unk_token);
      this.pattern = pythonPattern(spec.pre_tokenizer.pattern.Regex);
      this.cache = new Map();
    }

    encodePiece(piece) {
      if (this.cache.has(piece)) return this.cache.get(piece);
      let symbols = Array.from(piece); // code points, as Python's list(str)
      while (symbols.length > 1) {
        // the earliest-trained merge present in this piece goes first, as in training
        let best = Infinity;
        for (let i = 0; i + 1 < symbols.length; i++) {
          const rank = this.ranks.get(symbols[i])?.get(symbols[i + 1]);
          if (rank !== undefined && rank < best) best = rank;
        }
        if (best === Infinity) break;
        const [a, b] = this.merges[best];
        const merged = [];
        for (let j = 0; j < symbols.length; ) {
          if (j + 1 < symbols.length && symbols[j] === a && symbols[j + 1] === b) {
            merged.push(a + b);
            j += 2;
          } else {
            merged.push(symbols[j]);
            j += 1;
          }
        }
        symbols = merged;
      }
      const ids = symbols.map((s) => (this.ids.has(s) ? this.ids.get(s) : this.unk));
      this.cache.set(piece, ids);
      return ids;
    }

    encode(text) {
      const ids = [];
      for (const match of text.matchAll(this.pattern)) ids.push(...this.encodePiece(match[0]));
      return ids;
    }

    decode(ids) {
      return ids.map((id) => this.tokens[id]).join("");
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Decoding (notebook 10): softmax, temperature, top-k, top-p, as transformer_course.core.decoding

  function softmax(values) {
    const max = Math.max(...values);
    const exps = values.map((v) => (v === -Infinity ? 0 : Math.exp(v - max)));
    const total = exps.reduce((a, b) => a + b, 0);
    return exps.map((e) => e / total);
  }

  /** filter_logits: -Infinity for every logit outside the top-k and the top-p nucleus (0 / 1: no filter). */
  function filterLogits(logits, topK, topP) {
    let z = Array.from(logits);
    if (topK > 0 && topK < z.length) {
      const kth = [...z].sort((a, b) => b - a)[topK - 1];
      z = z.map((v) => (v < kth ? -Infinity : v));
    }
    if (topP < 1) {
      const order = z.map((_, i) => i).sort((i, j) => z[j] - z[i]);
      const probs = softmax(order.map((i) => z[i]));
      let before = 0; // the probability of the tokens ranked above this one
      const drop = new Set();
      order.forEach((i, rank) => {
        if (before >= topP) drop.add(i);
        before += probs[rank];
      });
      z = z.map((v, i) => (drop.has(i) ? -Infinity : v));
    }
    return z;
  }

  /** next_token_probs: softmax(filter(logits) / temperature). */
  function nextTokenProbs(logits, temperature, topK, topP) {
    return softmax(filterLogits(logits, topK, topP).map((v) => v / temperature));
  }

  function argmax(values) {
    let best = 0;
    for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i; // the first of equal maxima
    return best;
  }

  function randomNumbers(seed) {
    // mulberry32: a small seeded generator, so that a seed gives the same draws every time
    let a = seed >>> 0;
    return () => {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  function draw(probs, random) {
    let u = random();
    for (let i = 0; i < probs.length; i++) {
      u -= probs[i];
      if (u < 0) return i;
    }
    return argmax(probs);
  }

  // ---------------------------------------------------------------------------------------------------------------
  // The model

  class Model {
    static async load(manifest) {
      ort.env.wasm.numThreads = 1; // no worker threads: a page from disk or from a plain web server can start none
      ort.env.wasm.proxy = false;
      ort.env.wasm.wasmBinary = await gunzipBase64(takeFile("ort-wasm-simd-threaded.wasm"));
      const glue = new Blob([takeFile("ort-wasm-simd-threaded.mjs")], { type: "text/javascript" });
      ort.env.wasm.wasmPaths = { mjs: URL.createObjectURL(glue) };
      const graph = await gunzipBase64(takeFile("gpt_stdlib.onnx"));
      const session = await ort.InferenceSession.create(graph, { executionProviders: ["wasm"] });
      return new Model(session, manifest);
    }

    constructor(session, manifest) {
      this.session = session;
      this.queue = Promise.resolve(); // one run at a time: a session runs no two calls at once
      this.context = manifest.config.context;
      this.layers = manifest.config.num_layers;
      this.heads = manifest.config.num_heads;
    }

    /** ids (at most the context) -> the last position's logits and every layer's and head's attention weights. */
    async run(ids) {
      const input = new ort.Tensor("int64", BigInt64Array.from(ids, (id) => BigInt(id)), [1, ids.length]);
      const run = this.queue.then(() => this.session.run({ input_ids: input }));
      this.queue = run.catch(() => {});
      const out = await run;
      const vocab = out.logits.dims[2];
      const length = ids.length;
      return {
        ids,
        logits: Array.from(out.logits.data.subarray((length - 1) * vocab, length * vocab)),
        attention: out.attention.data, // (layers, 1, heads, length, length)
      };
    }

    /** The weights of one layer and head: row q is query q's weights over the keys 0..length-1. */
    static map(result, layer, head, heads) {
      const n = result.ids.length;
      const start = (layer * heads + head) * n * n;
      return result.attention.subarray(start, start + n * n);
    }
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Drawing

  // viridis (matplotlib's, which the notebooks' attention maps use) at 0, 1/8, ..., 1
  const VIRIDIS = [
    [68, 1, 84], [71, 45, 123], [59, 82, 139], [44, 114, 142], [33, 145, 140],
    [40, 174, 128], [94, 201, 98], [173, 220, 48], [253, 231, 37],
  ];

  function viridis(t) {
    const x = Math.min(Math.max(t, 0), 1) * (VIRIDIS.length - 1);
    const i = Math.min(Math.floor(x), VIRIDIS.length - 2);
    const f = x - i;
    const [r, g, b] = VIRIDIS[i].map((c, k) => Math.round(c + f * (VIRIDIS[i + 1][k] - c)));
    return `rgb(${r},${g},${b})`;
  }

  function visible(token) {
    return token.replace(/ /g, "·").replace(/\n/g, "↵").replace(/\t/g, "→");
  }

  function shortLabel(token) {
    const label = visible(token);
    return label.length > 9 ? label.slice(0, 8) + "…" : label;
  }

  function drawMap(canvas, weights, labels, first) {
    // weights: (n, n) row-major; draws rows and columns first..n-1
    const n = labels.length;
    const shown = n - first;
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth || 560;
    canvas.width = width * ratio;
    canvas.height = width * ratio;
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, width);
    const margin = 78;
    const cell = (width - margin - 4) / shown;
    ctx.font = `${Math.max(8, Math.min(12, cell * 0.8))}px ui-monospace, monospace`;
    ctx.fillStyle = "#222";
    ctx.textBaseline = "middle";
    for (let q = first; q < n; q++) {
      const y = margin + (q - first) * cell;
      ctx.textAlign = "right";
      ctx.fillText(shortLabel(labels[q]), margin - 4, y + cell / 2);
      for (let k = first; k < n; k++) {
        ctx.fillStyle = viridis(weights[q * n + k]);
        ctx.fillRect(margin + (k - first) * cell, y, Math.ceil(cell), Math.ceil(cell));
      }
      ctx.fillStyle = "#222";
    }
    for (let k = first; k < n; k++) {
      ctx.save();
      ctx.translate(margin + (k - first) * cell + cell / 2, margin - 4);
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = "left";
      ctx.fillText(shortLabel(labels[k]), 0, 0);
      ctx.restore();
    }
    return { margin, cell, first, n };
  }

  function drawBars(element, probs, tokens, chosen, note) {
    const order = probs
      .map((_, i) => i)
      .filter((i) => probs[i] > 0) // the tokens the filters removed, and <unk>, cannot be chosen
      .sort((i, j) => probs[j] - probs[i])
      .slice(0, BARS);
    element.replaceChildren();
    for (const id of order) {
      const row = document.createElement("div");
      row.className = "bar" + (id === chosen ? " chosen" : "");
      row.dataset.id = String(id);
      const label = document.createElement("span");
      label.className = "bar-label";
      label.textContent = visible(tokens[id]);
      const track = document.createElement("span");
      track.className = "bar-track";
      const fill = document.createElement("span");
      fill.className = "bar-fill";
      fill.style.width = `${(100 * probs[id]).toFixed(2)}%`;
      track.append(fill);
      const value = document.createElement("span");
      value.className = "bar-value";
      value.textContent = `${(100 * probs[id]).toFixed(1)}%` + (id === chosen ? ` · ${TEXT.chosen}` : "");
      row.append(label, track, value);
      element.append(row);
    }
    const caption = document.createElement("p");
    caption.className = "bar-note";
    caption.textContent = note;
    element.append(caption);
  }

  function showTokens(element, tokens, promptIds, newIds) {
    element.replaceChildren();
    for (const [ids, kind] of [
      [promptIds, "prompt"],
      [newIds, "new"],
    ]) {
      for (const id of ids) {
        const span = document.createElement("span");
        span.className = `token ${kind}`;
        span.textContent = tokens[id];
        span.title = `${id}: ${JSON.stringify(tokens[id])}`;
        element.append(span);
      }
    }
    element.dataset.promptIds = JSON.stringify(promptIds);
    element.dataset.newIds = JSON.stringify(newIds);
  }

  // ---------------------------------------------------------------------------------------------------------------
  // The page

  const $ = (id) => document.getElementById(id);
  const nextFrame = () => new Promise((resolve) => setTimeout(resolve, 0));

  function settings() {
    return {
      greedy: $("decoding").value === "greedy",
      temperature: Number($("temperature").value),
      topK: Number($("top-k").value),
      topP: Number($("top-p").value),
      newTokens: Number($("new-tokens").value),
      seed: Number($("seed").value) || 0,
    };
  }

  function showSettings() {
    const s = settings();
    $("temperature-value").textContent = s.temperature.toFixed(2);
    $("top-k-value").textContent = s.topK > 0 ? String(s.topK) : TEXT.off;
    $("top-p-value").textContent = s.topP < 1 ? s.topP.toFixed(2) : TEXT.off;
    $("new-tokens-value").textContent = String(s.newTokens);
    for (const id of ["temperature", "top-k", "top-p", "seed"]) $(id).disabled = s.greedy;
  }

  function setStatus(state, text) {
    const status = $("status");
    status.dataset.state = state;
    status.textContent = text;
  }

  async function start() {
    const started = performance.now();
    setStatus("loading", TEXT.loading);
    const spec = takeFile("tokenizer.json");
    const manifest = takeFile("gpt_stdlib.export.json");
    const tokenizer = new BPETokenizer(spec);
    window.coursePlayground.encode = (text) => tokenizer.encode(text);
    window.coursePlayground.decode = (ids) => tokenizer.decode(ids);
    const banned = manifest.unk_id === null ? [] : [manifest.unk_id];
    for (const [name, value] of Object.entries({
      parameters: manifest.parameters.toLocaleString(LANGUAGE === "zh" ? "zh-CN" : "en"),
      bits: manifest.held_out_bits_per_character.toFixed(2),
      context: String(manifest.config.context),
      vocab: String(manifest.vocab_size),
    })) {
      for (const element of document.querySelectorAll(`[data-fact="${name}"]`)) element.textContent = value;
    }
    for (const text of manifest.examples) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "example";
      button.textContent = text;
      button.addEventListener("click", () => {
        $("prompt").value = text;
        analyse();
      });
      $("examples").append(button);
    }
    for (const [select, count] of [
      [$("layer"), manifest.config.num_layers],
      [$("head"), manifest.config.num_heads],
    ]) {
      for (let i = 0; i < count; i++) select.append(new Option(String(i), String(i)));
    }

    const model = await Model.load(manifest);
    const page = { model, tokenizer, manifest, last: null, running: false, stop: false, map: null };
    window.coursePlayground.page = page;

    /** The distribution the next token is chosen from: the logits with <unk> banned, then softmax at
     *  temperature 1 (greedy) or next_token_probs with the settings (sampling). */
    function distribution(logits) {
      const z = logits.slice();
      for (const id of banned) z[id] = -Infinity;
      const s = settings();
      const probs = s.greedy ? softmax(z) : nextTokenProbs(z, s.temperature, s.topK, s.topP);
      return { z, probs, greedy: s.greedy };
    }

    function showDistribution(shown, chosen) {
      drawBars($("bars"), shown.probs, tokenizer.tokens, chosen, shown.greedy ? TEXT.greedyNote : TEXT.sampleNote);
    }

    function redrawMap() {
      if (!page.last) return;
      const layer = Number($("layer").value);
      const head = Number($("head").value);
      const weights = Model.map(page.last, layer, head, model.heads);
      const labels = page.last.ids.map((id) => tokenizer.tokens[id]);
      const first = Math.max(0, labels.length - MAP_TOKENS);
      page.map = { ...drawMap($("attention-map"), weights, labels, first), weights, labels };
      $("attention-map").dataset.layer = String(layer);
      $("attention-map").dataset.head = String(head);
      $("map-note").textContent = TEXT.mapShown(labels.length - first, labels.length);
    }

    function show(result) {
      page.last = result;
      redrawMap();
    }

    /** The model's outputs for ids: it reads at most its context, the last tokens (as generate does). */
    const read = (ids) => model.run(ids.slice(-model.context));

    async function analyse() {
      if (page.running) return;
      const ids = tokenizer.encode($("prompt").value);
      showTokens($("output"), tokenizer.tokens, ids, []);
      if (!ids.length) {
        setStatus("ready", TEXT.empty);
        return;
      }
      const result = await read(ids);
      if (page.running) return; // generation started meanwhile: it shows its own steps
      show(result);
      showDistribution(distribution(result.logits), null);
    }

    /** count new tokens after the prompt, or with ``more`` after the text shown (prompt and tokens made so far). */
    async function generate(count, more = false) {
      if (page.running) return;
      const shown = $("output").dataset;
      const promptIds = more ? JSON.parse(shown.promptIds || "[]") : tokenizer.encode($("prompt").value);
      if (!promptIds.length) {
        setStatus("ready", TEXT.empty);
        return;
      }
      const s = settings();
      const random = randomNumbers(s.seed);
      const ids = promptIds.concat(more ? JSON.parse(shown.newIds || "[]") : []);
      const began = performance.now();
      clearTimeout(page.typing);
      page.running = true;
      page.stop = false;
      for (const id of ["generate", "step"]) $(id).disabled = true;
      $("stop").disabled = false;
      let made = 0;
      try {
        for (; made < count && !page.stop; made++) {
          setStatus("running", TEXT.running(made + 1, count));
          const result = await read(ids);
          show(result);
          const next = distribution(result.logits);
          const chosen = next.greedy ? argmax(next.z) : draw(next.probs, random);
          showDistribution(next, chosen);
          ids.push(chosen);
          showTokens($("output"), tokenizer.tokens, promptIds, ids.slice(promptIds.length));
          await nextFrame();
        }
        const elapsed = performance.now() - began;
        setStatus("done", page.stop ? TEXT.stopped(made) : TEXT.done(made, elapsed));
      } finally {
        page.running = false;
        for (const id of ["generate", "step"]) $(id).disabled = false;
        $("stop").disabled = true;
      }
      return ids.slice(promptIds.length);
    }

    $("prompt").addEventListener("input", () => {
      clearTimeout(page.typing);
      page.typing = setTimeout(analyse, 250);
    });
    for (const id of ["decoding", "temperature", "top-k", "top-p", "new-tokens", "seed"]) {
      $(id).addEventListener("input", () => {
        showSettings();
        if (page.last && !page.running) showDistribution(distribution(page.last.logits), null);
      });
    }
    $("layer").addEventListener("change", redrawMap);
    $("head").addEventListener("change", redrawMap);
    $("generate").addEventListener("click", () => generate(settings().newTokens));
    $("step").addEventListener("click", () => generate(1, true));
    $("stop").addEventListener("click", () => {
      page.stop = true;
    });
    $("attention-map").addEventListener("mousemove", (event) => {
      const m = page.map;
      if (!m) return;
      const box = event.target.getBoundingClientRect();
      const k = m.first + Math.floor((event.clientX - box.left - m.margin) / m.cell);
      const q = m.first + Math.floor((event.clientY - box.top - m.margin) / m.cell);
      if (q < m.first || k < m.first || q >= m.n || k >= m.n) return;
      $("map-readout").textContent = TEXT.cell(
        JSON.stringify(m.labels[q]),
        JSON.stringify(m.labels[k]),
        m.weights[q * m.n + k],
      );
    });

    showSettings();
    $("prompt").value = manifest.examples[0];
    await analyse();
    for (const id of ["generate", "step"]) $(id).disabled = false;
    window.coursePlayground.loadMilliseconds = performance.now() - started;
    setStatus("ready", TEXT.ready(window.coursePlayground.loadMilliseconds));
    Object.assign(window.coursePlayground, { generate, analyse });
  }

  window.coursePlayground = { filterLogits, nextTokenProbs };
  window.coursePlayground.ready = start().catch((error) => {
    setStatus("error", TEXT.failed + error.message);
    throw error;
  });
})();
