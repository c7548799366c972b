// The training widgets' static figures (book/_static/fallbacks/train-*.fallback.svg) are what
// the widgets' own code draws today: scripts/make_train_fallbacks.mjs runs the same training
// sessions, seeded, so a fresh drawing must equal the committed file byte for byte. A change to
// the runtime's training code that moves the figures fails here until the script is re-run
// (and scripts/add_training_widgets.py refreshes the chapters' alt texts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { FALLBACKS, inductionFigure, textFigure } from "../../scripts/make_train_fallbacks.mjs";

for (const draw of [inductionFigure, textFigure]) {
  test(`${draw.name}: the committed figure is the one the training code draws`, () => {
    const { name, svg } = draw();
    const committed = readFileSync(`${FALLBACKS}${name}`, "utf8");
    assert.ok(svg === committed, `${name} is stale: run node scripts/make_train_fallbacks.mjs, ` +
      "then python scripts/add_training_widgets.py");
  });
}
