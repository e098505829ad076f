// Tokenizes strings with llama.cpp (node-llama-cpp, on a GGUF vocabulary) and with Hugging Face's
// tokenizer semantics (@lenml/tokenizers, on the same vocabulary's tokenizer.json), for grove's
// vocabulary tests. Reads {"gguf": PATH, "hf": NAME or null, "strings": [...]} on stdin, where NAME
// is a @lenml/tokenizer-NAME package; writes {"llama_cpp": {"plain": [[ids]], "special": [[ids]]},
// "hf": [[ids]] or null} to stdout. No BOS is added anywhere. "plain" treats special-token text as
// text, "special" splits it out (llama.cpp's parse_special); Hugging Face always splits it out.
import {getLlama} from "node-llama-cpp";

const request = JSON.parse(await new Promise((resolve) => {
  let text = "";
  process.stdin.on("data", (chunk) => (text += chunk));
  process.stdin.on("end", () => resolve(text));
}));

const llama = await getLlama({gpu: false, build: "never", logLevel: "error", progressLogs: false});
const model = await llama.loadModel({modelPath: request.gguf, vocabOnly: true});
const result = {llama_cpp: {plain: [], special: []}, hf: null};
for (const s of request.strings) {
  result.llama_cpp.plain.push(Array.from(model.tokenize(s, false)));
  result.llama_cpp.special.push(Array.from(model.tokenize(s, true)));
}
if (request.hf) {
  const {fromPreTrained} = await import(`@lenml/tokenizer-${request.hf}`);
  const tokenizer = fromPreTrained();
  result.hf = request.strings.map((s) => tokenizer.encode(s, {add_special_tokens: false}));
}
process.stdout.write(JSON.stringify(result));
await model.dispose();
await llama.dispose();
