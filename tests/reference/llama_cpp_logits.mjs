// Runs llama.cpp (node-llama-cpp's prebuilt CPU binaries) on a GGUF file for grove's tests.
// Reads a JSON request on stdin:
//   {"model": PATH, "tokens": [ids], "context": N, "threads": N, "kv_type": "F32" | "F16",
//    "greedy": {"prompt": [ids], "n": N}}            (greedy optional)
// and writes {"n_vocab": V, "logits": [[V floats] per token of "tokens"], "greedy": [ids],
// "margins": [top-1 minus top-2 logit of each greedy step]} to stdout: the logits after each
// token of one causal sequence, and greedy continuation ids chosen from llama.cpp's own logits
// (argmax, lowest id on a tie). The KV cache is kept in f32, so the reference computes in f32
// throughout as grove does, unless the request says "kv_type": "F16" (llama.cpp's own default,
// against grove's --cache-type f16).
import {getLlama} from "node-llama-cpp";

const request = JSON.parse(await new Promise((resolve) => {
  let text = "";
  process.stdin.on("data", (chunk) => (text += chunk));
  process.stdin.on("end", () => resolve(text));
}));

const llama = await getLlama({gpu: false, build: "never", logLevel: "error", progressLogs: false});
const model = await llama.loadModel({modelPath: request.model, gpuLayers: 0});
const context = await model.createContext({
  contextSize: request.context ?? 256,
  batchSize: 512,
  threads: request.threads ?? 1,
  flashAttention: false,
  swaFullCache: true,
  experimentalKvCacheKeyType: request.kv_type ?? "F32",
  experimentalKvCacheValueType: request.kv_type ?? "F32",
});
const sequence = context.getSequence();
const nVocab = model.tokens.count ?? undefined;

function dense(map) {
  const row = new Array(map.size);
  for (const [token, value] of map) row[token] = value;
  return row;
}

function argmax(row) {
  let best = 0;
  for (let i = 1; i < row.length; ++i) if (row[i] > row[best]) best = i;
  return best;
}

async function logitsAfterEach(tokens) {
  const out = await sequence.controlledEvaluate(tokens.map((t) => [t, {generateNext: {logits: true}}]));
  return out.map((o) => dense(o.next.logits));
}

const result = {};
if (request.tokens?.length) result.logits = await logitsAfterEach(request.tokens);
if (request.greedy) {
  await sequence.clearHistory();
  const last = await sequence.controlledEvaluate(
      request.greedy.prompt.map((t, i) =>
          i + 1 === request.greedy.prompt.length ? [t, {generateNext: {logits: true}}] : t));
  let row = dense(last[last.length - 1].next.logits);
  result.greedy = [];
  result.margins = [];
  for (let i = 0; i < request.greedy.n; ++i) {
    const token = argmax(row);
    result.greedy.push(token);
    let second = -Infinity;
    for (let t = 0; t < row.length; ++t) if (t !== token && row[t] > second) second = row[t];
    result.margins.push(row[token] - second);
    if (i + 1 < request.greedy.n) row = (await logitsAfterEach([token]))[0];
  }
}
result.n_vocab = result.logits?.[0]?.length ?? nVocab;
process.stdout.write(JSON.stringify(result));
await context.dispose();
await model.dispose();
await llama.dispose();
