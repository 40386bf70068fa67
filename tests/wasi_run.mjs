// wasi_run.mjs MODULE.wasm [ARGS...] - run a wasm32-wasi program under node's WASI (make
// wasm-test): the environment is passed through (POOLED_TEST_TMP, ...), the folder
// POOLED_TEST_TMP (default: a fresh one under the system's temporary folder) is preopened at
// the same path so test_tmpdir() works, and the program's exit status becomes ours.
import { readFile } from "node:fs/promises";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WASI } from "node:wasi";

const [file, ...args] = process.argv.slice(2);
if (!file) {
    console.error("usage: node wasi_run.mjs MODULE.wasm [ARGS...]");
    process.exit(2);
}
const tmp = process.env.POOLED_TEST_TMP || mkdtempSync(join(tmpdir(), "pooled-wasm-"));
const wasi = new WASI({
    version: "preview1",
    args: [file, ...args],
    env: { ...process.env, POOLED_TEST_TMP: tmp },
    preopens: { [tmp]: tmp },
    returnOnExit: true,
});
const module = await WebAssembly.compile(await readFile(file));
const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
process.exitCode = wasi.start(instance);
