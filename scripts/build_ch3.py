"""(Re)write book/03_learning_to_align.ipynb's cells from this file, keeping its Colab cell.

A maintenance script for chapter 3's author: the chapter is plain cells, and
this file is their source. After running it, execute the notebook:

    python scripts/build_ch3.py && python scripts/sync_colab_cell.py
    jupyter execute --inplace book/03_learning_to_align.ipynb
"""

import json
from pathlib import Path

import nbformat

BOOK = Path(__file__).resolve().parents[1] / "book"
PATH = BOOK / "03_learning_to_align.ipynb"

cells = []


def md(text):
    cells.append(nbformat.v4.new_markdown_cell(text.strip("\n")))


def code(text, tags=(), alt=None, caption=None, name=None):
    cell = nbformat.v4.new_code_cell(text.strip("\n"))
    if tags:
        cell.metadata["tags"] = list(tags)
    if alt:
        cell.metadata["mystnb"] = {"image": {"alt": alt},
                                   "figure": {"caption": caption, "name": name}}
    cells.append(cell)


md(r"""
(learning-to-align)=
# Attention learns to align

:::{admonition} In this chapter
:class: tip

**What you will learn**

- the two encoder-decoders of Bahdanau, Cho and Bengio {cite:p}`bahdanau2015`,
  RNNencdec and RNNsearch, equation by equation, with the shape of every array;
- how a model written in NumPy, with every backward pass by hand, learns to translate a
  small English-to-French grammar, and how its attention map goes from uniform to an
  alignment while you watch;
- the paper's two headline results, reproduced by models trained with this book's code:
  without attention, translation quality collapses as sentences get longer (its
  Figure 2), and with attention the weights find the word alignment, reorderings
  included (its Figure 3).

**What you need**

{doc}`Chapter 1 <01_bottleneck>` (the bottleneck of one fixed vector) and
{doc}`chapter 2 <02_bahdanau>` (additive attention, computed with random weights). The
symbols are those of the {doc}`notation page <notation>`.
:::
""")

code(r"""
%matplotlib inline
from collections import Counter

import matplotlib.pyplot as plt
import numpy as np
from myst_nb import glue

from attention_lib import print_table
from attention_lib.models import RNNencdec, RNNsearch
from attention_lib.models.evaluation import (alignment_error_rate, evaluate,
                                             forced_attention, make_test_sets)
from attention_lib.models.train_seq2seq import load_checkpoints, train
from attention_lib.plotting import mark_cells, plot_weights, use_book_style
from attention_lib.toy_translation import (VERBS, encode_batch, generate_pairs,
                                           source_vocab, target_vocab)

use_book_style()
""")

md(r"""
## From random weights to learned ones

{doc}`Chapter 2 <02_bahdanau>` computed Bahdanau's attention with random weights, so its
maps could not mean anything, and {doc}`chapter 1 <01_bottleneck>` argued that one
fixed-size vector cannot hold a long sentence. Neither chapter *trained* anything. The
paper's evidence is training: a model with attention and one without, trained on the
same sentences, compared on sentences of growing length. This chapter does that, on a
task small enough to train in seconds: a toy English-to-French grammar.

Its sentences are clauses joined by "and", and French rearranges each clause the way
real French does. Adjectives follow their noun ("the red cat" becomes "le chat
rouge"); determiners and adjectives agree with the noun's gender, which comes *later* in
the English; "near" becomes two words ("près de"), "never" becomes two words that
surround the verb ("ne ... jamais"), and two words, "a lot", become one, "beaucoup",
which jumps from the end of the English clause to right after the French verb. The
generator writes each French word together with the English word(s) it translates, so
the right alignment is known exactly. Here is a short pair and its gold links:
""")

code(r"""
pair = generate_pairs(1, 12, 12, seed=11)[0]
print("English:", " ".join(pair.source))
print("French: ", " ".join(pair.target))
by_target = sorted(pair.alignment, key=lambda link: link[1])
links = [f"{pair.source[j]}->{pair.target[i]}" for j, i in by_target]
print("links:  ", ", ".join(links[:5]) + ",")
print("        ", ", ".join(links[5:10]) + ",")
print("        ", ", ".join(links[10:]))
""")

md(r"""
The source has $S$ words and the target $T$; the two need not match, and the links
cross. A vocabulary of {glue:text}`n_src` English and {glue:text}`n_tgt` French tokens
(counting padding, `<bos>` and `<eos>`) is enough for millions of sentences of 5 to 50
words. Words become integer ids and a batch is padded to its longest sentence:
""")

code(r"""
src_vocab, tgt_vocab = source_vocab(), target_vocab()
batch = generate_pairs(3, 5, 9, seed=1)
src, lengths, tgt_in, tgt_out = encode_batch(batch, src_vocab, tgt_vocab)
print("src", src.shape, "lengths", lengths, "tgt_in", tgt_in.shape)
print(src)
print(tgt_in[0], "<- <bos> (1), then the French words")
print(tgt_out[0], "<- the same words shifted, then <eos> (2)")
glue("n_src", len(src_vocab), display=False)
glue("n_tgt", len(tgt_vocab), display=False)
""")

md(r"""
## The encoder-decoder, line by line

Both models read the source with the same **encoder**, a bidirectional GRU, the
paper's choice. Each word $x_j$ becomes an embedding of $e = 16$ numbers; a forward GRU
reads them left to right and a backward GRU right to left, each with a state of
$H = 48$ numbers, and the two states at word $j$ are stacked:

$$
\overrightarrow{h}_j = \mathrm{GRU}(E x_j, \overrightarrow{h}_{j-1}), \qquad
\overleftarrow{h}_j = \mathrm{GRU}(E x_j, \overleftarrow{h}_{j+1}), \qquad
h_j = [\overrightarrow{h}_j ; \overleftarrow{h}_j] \quad (B, S, 2H).
$$

So $h_j$ knows the word $x_j$ and both sides of it. The GRU follows PyTorch's `nn.GRU`
exactly: a reset gate $r$ and an update gate $z$ decide how much of the old state to
read and how much to keep (the library's `attention_lib.nn.GRU` writes them out).
Padding freezes the state, so a padded sentence ends where the unpadded one would.

The **decoder** is a GRU too. Its first state comes from the encoder's two final
states, and each step $i$ reads the previous French word $y_{i-1}$ (teacher forcing:
during training, the *correct* previous word) and a context $c_i$:

$$
s_0 = \tanh\big([\overrightarrow{h}_S ; \overleftarrow{h}_1] W_s + b_s\big) \quad (B, H),
$$

$$
s_i = f(s_{i-1}, y_{i-1}, c_i) = \mathrm{GRU}\big([E y_{i-1} ; c_i],\ s_{i-1}\big)
\quad (B, H),
$$

$$
p(y_i \mid y_{<i}, x) = \operatorname{softmax}\big([s_i ; c_i ; E y_{i-1}] W_o + b_o\big)
\quad (B, V).
$$

The two models differ in one line only, **where the context comes from**:

- **RNNencdec**: $c_i = [\overrightarrow{h}_S ; \overleftarrow{h}_1]$ for every $i$, the
  same $2H = 96$ numbers at every step: the whole sentence through one fixed vector, the
  bottleneck of chapter 1;
- **RNNsearch**: $c_i = \sum_j \alpha_{ij} h_j$ with
  $\alpha_{ij} = \operatorname{softmax}_j(e_{ij})$ and
  $e_{ij} = v_a^\top \tanh(W_a s_{i-1} + U_a h_j)$: chapter 2's additive attention,
  computed from the state *before* the step, now with weights $W_a$ $(H, d_a)$,
  $U_a$ $(2H, d_a)$ and $v_a$ $(d_a)$ that are learned, $d_a = 32$.

```{figure} _static/diagrams/rnnsearch.svg
:alt: Diagram of RNNsearch. Four English words feed a forward GRU row and a backward GRU row whose states are stacked into h_1 to h_4; lines of different widths, the attention weights, join the h_j to a context c_i, which enters the decoder's GRU step from s_{i-1} to s_i together with the previous word y_{i-1}.
:name: fig-ch3-rnnsearch
:width: 700px

RNNsearch. The encoder's forward and backward GRU states are stacked into $h_j$; one
decoder step builds its context $c_i$ from every $h_j$, weighted by $\alpha_{ij}$
(drawn as line widths), and updates $s_{i-1}$ to $s_i$ from $y_{i-1}$ and $c_i$.
RNNencdec replaces $c_i$ by the two final encoder states. Shapes are per batch of
$B$ sentences of $S$ words.
```

The library builds both from the same parts. Let us make one of each and look at
the shapes on a batch:
""")

code(r"""
SIZES = dict(emb=16, hidden=48, attn=32)
search = RNNsearch(len(src_vocab), len(tgt_vocab), **SIZES, seed=0)
encdec = RNNencdec(len(src_vocab), len(tgt_vocab), **SIZES, seed=0)
H_enc, mask, s0 = search.encode(src, lengths)
print("h_j  ", H_enc.shape, "  (B, S, 2H)")
print("mask ", mask.shape, "  (B, S): True at real words")
print("s_0  ", s0.shape, "   (B, H)")
print(f"parameters: RNNsearch {search.n_params():,}, "
      f"RNNencdec {encdec.n_params():,}")
""")

md(r"""
RNNsearch has {glue:text}`n_att_params` more parameters than RNNencdec, those of
$W_a$, $U_a$ and $v_a$, and a decoder input that is the same size in both. The
difference in what follows is not size: it is which numbers the decoder may read.

`loss` runs the encoder, then the decoder step by step (the context from $s_{i-1}$,
then the GRU update), and returns the mean cross-entropy over the real target words;
`backward` goes through the same steps in reverse, through time and through the
attention. Every gradient is checked against central differences in float64, for every
parameter of both models on a padded batch, in `tests/test_seq2seq.py`; here is the
idea for one weight of the attention:
""")

code(r"""
tiny = RNNsearch(len(src_vocab), len(tgt_vocab), emb=4, hidden=5, attn=3, seed=1,
                 dtype=np.float64)
tiny.loss(src, lengths, tgt_in, tgt_out)
tiny.backward()
by_hand = tiny.att.grads["v"][0]        # keep it: the next loss() starts new sums
v = tiny.att.params["v"]
h = 1e-6
v[0] += h
up = tiny.loss(src, lengths, tgt_in, tgt_out)
v[0] -= 2 * h
down = tiny.loss(src, lengths, tgt_in, tgt_out)
v[0] += h
print(f"d loss / d v[0]: backward {by_hand:.6f}, "
      f"central difference {(up - down) / (2 * h):.6f}")
""")

code(r"""
glue("n_att_params", search.n_params() - encdec.n_params(), display=False)
""", tags=["remove-cell"])

md(r"""
## Watching attention learn

Now train RNNsearch, on the page, for {glue:text}`live_steps` steps of Adam on batches
of 32 sentences of 5 to 15 words, clipping the gradient's norm at 1 as recurrent
networks need (a gradient pushed back through many steps can blow up). We keep one
sentence aside and record its attention map before training and twice during it.
""")

code(r"""
LIVE_STEPS, SNAPSHOTS = 300, (0, 150, 300)
example = generate_pairs(1, 11, 11, seed=5)[0]
ex_batch = encode_batch([example], src_vocab, tgt_vocab)
live = RNNsearch(len(src_vocab), len(tgt_vocab), seed=0, dtype=np.float64)
maps = {}


def snapshot(step, model):
    if step in SNAPSHOTS:
        model.loss(*ex_batch)
        maps[step] = model.attention_weights[0, :len(example.target)].copy()


snapshot(0, live)
losses = train(live, LIVE_STEPS, 5, 15, seed=7, callback=snapshot)
print(f"mean loss of steps 1-20: {np.mean(losses[:20]):.2f}, "
      f"of steps {LIVE_STEPS - 19}-{LIVE_STEPS}: {np.mean(losses[-20:]):.2f}")
""")

code(r"""
glue("live_steps", LIVE_STEPS, display=False)
gold_cells = [(i, j) for j, i in example.alignment]
on_gold = {s: float(np.mean([maps[s][i, j] for i, j in gold_cells]))
           for s in SNAPSHOTS}
glue("live_gold_0", round(on_gold[0], 2), display=False)
glue("live_gold_mid", round(on_gold[SNAPSHOTS[1]], 2), display=False)
glue("live_gold_end", round(on_gold[LIVE_STEPS], 2), display=False)
glue("live_uniform", round(1 / len(example.source), 2), display=False)
""", tags=["remove-cell"])

code(r"""
fig, axes = plt.subplots(1, 4, figsize=(7.2, 2.9), width_ratios=[1.1, 1, 1, 1])
axes[0].semilogy(np.arange(1, LIVE_STEPS + 1), losses, color="#0072B2", lw=1)
axes[0].set(xlabel="training step", ylabel="loss (log scale)")
for s in SNAPSHOTS[1:]:
    axes[0].axvline(s, color="0.4", ls=":", lw=1)
for ax, s in zip(axes[1:], SNAPSHOTS):
    plot_weights(maps[s], row_labels=example.target, col_labels=example.source,
                 ax=ax, vmax=1.0, colorbar=False, xlabel=f"step {s}", ylabel="")
    mark_cells(ax, gold_cells, style="dot")
    ax.tick_params(labelsize=7)
    if s:
        ax.set_yticklabels([])
plt.show()
""", tags=["hide-input"],
     alt="Left, the training loss on a log scale falling over 300 steps. Right, three "
         "attention maps of one 11-word sentence, French words as rows and English words "
         "as columns, at steps 0, 150 and 300: the first is uniform grey, the second is "
         "blurred, the last is one bright cell per row on the dots marking the gold links.",
     caption="Training RNNsearch live. Left: the loss of each batch (log scale); dotted "
             "lines mark the snapshots. Right: the attention of one held-aside sentence "
             "before training, at step 150 and at the end; rows are French words, columns "
             "English words, and dots mark the gold links.",
     name="fig-ch3-live")

md(r"""
Before training, every French word spreads its attention evenly (on average
{glue:text}`live_gold_0` on its gold source word, about $1/11 \approx$
{glue:text}`live_uniform`). By step 150 they have gathered part of the way (an average of
{glue:text}`live_gold_mid` on the gold word), and after
{glue:text}`live_steps` steps the average weight on the gold word is
{glue:text}`live_gold_end`: the map has become the alignment, with the adjective-noun
swaps in place. Nothing told the model which word translates which. The gradient of the
translation loss flowed back through $c_i = \sum_j \alpha_{ij} h_j$ into the scores, and
the scores that helped predict the next French word grew.

## Figure 2, reproduced: quality against sentence length

The paper's Figure 2 plots BLEU against sentence length for four models: RNNencdec and
RNNsearch, each trained on sentences of up to 30 words ("-30") or up to 50 ("-50"). We
trained the same four here with the library's script
(`python -m attention_lib.models.train_seq2seq`, a few minutes of CPU), on sentences of
5-20 and 5-50 words, and committed their weights with a manifest of their settings and
checksums in `data/checkpoints/seq2seq/`. Loading checks every file's sha256:
""")

code(r"""
manifest, models = load_checkpoints()
rows = [[name, m["model"], "{}-{}".format(*m["train_words"]),
         f"{m['parameters']:,}", f"{m['steps']:,}"]
        for name, m in manifest["models"].items()]
print_table(rows, ["checkpoint", "model", "trained on", "parameters", "Adam steps"])
""")

md(r"""
RNNsearch needs fewer steps: attention gives the gradient a short path from each
French word to its English word, while RNNencdec must learn to squeeze the whole
sentence into its final states first. Each model now translates 100 unseen test
sentences in each length bucket, greedily (the most likely word at each step, fed back
as the next input, without teacher forcing). We score the translations with BLEU,
computed by sacreBLEU {cite:p}`post2018`, the field's reference implementation (100
means every sentence is exact; it counts matching word sequences of one to four words),
and by the share of sentences translated exactly:
""")

code(r"""
tests = make_test_sets(manifest["test_per_bucket"], manifest["test_seed"])
results = {}
for name, model in models.items():          # the AER only for the main model
    results[name] = evaluate(model, tests, src_vocab, tgt_vocab,
                             alignment=(name == "rnnsearch_50"))
buckets = [b["words"] for b in results["rnnsearch_50"]["buckets"]]
rows = [[name] + [f"{b['bleu']:.1f}" for b in r["buckets"]]
        for name, r in results.items()]
print_table(rows, ["BLEU"] + buckets)
""")

code(r"""
def bleu_at(name, bucket):
    return next(b["bleu"] for b in results[name]["buckets"] if b["words"] == bucket)


glue("bleu_search_long", bleu_at("rnnsearch_50", "45-50"), display=False)
glue("bleu_encdec_long", bleu_at("rnnencdec_50", "45-50"), display=False)
glue("bleu_search_short_words", bleu_at("rnnsearch_50", "5-9"), display=False)
glue("bleu_encdec_short_words", bleu_at("rnnencdec_50", "5-9"), display=False)
glue("bleu_search20_long", bleu_at("rnnsearch_20", "45-50"), display=False)
glue("bleu_encdec20_long", bleu_at("rnnencdec_20", "45-50"), display=False)
glue("bleu_gap_long", round(bleu_at("rnnsearch_50", "45-50")
                            - bleu_at("rnnencdec_50", "45-50"), 1), display=False)
glue("exact_search_long", round(100 * results["rnnsearch_50"]["buckets"][-1]["exact"]),
     display=False)
glue("exact_encdec_long", round(100 * results["rnnencdec_50"]["buckets"][-1]["exact"]),
     display=False)
""", tags=["remove-cell"])

code(r"""
STYLE = {"rnnsearch_50": ("RNNsearch-50", "#0072B2", "-", "o"),
         "rnnsearch_20": ("RNNsearch-20", "#0072B2", "--", "s"),
         "rnnencdec_50": ("RNNencdec-50", "#D55E00", "-", "^"),
         "rnnencdec_20": ("RNNencdec-20", "#D55E00", "--", "v")}
x = [np.mean([int(w) for w in b.split("-")]) for b in buckets]
fig, (ax_b, ax_e) = plt.subplots(1, 2, figsize=(7.2, 3.0))
for name, (label, colour, ls, marker) in STYLE.items():
    r = results[name]["buckets"]
    style = dict(color=colour, ls=ls, marker=marker)
    ax_b.plot(x, [b["bleu"] for b in r], label=label, **style)
    ax_e.plot(x, [100 * b["exact"] for b in r], **style)
for ax in (ax_b, ax_e):
    ax.axvspan(20.5, 51, color="0.93", zorder=0)
    ax.set(xlabel="source sentence length (words)", ylim=(-3, 103), xlim=(5, 50))
ax_b.set_ylabel("BLEU (sacreBLEU)")
ax_e.set_ylabel("sentences exactly right (%)")
ax_b.legend(loc="lower left", fontsize=8)
plt.show()
""", tags=["hide-input"],
     alt="Two line plots against source sentence length from 5 to 50 words, four models "
         "each. BLEU, left, and exact sentences, right, stay near the top for "
         "RNNsearch-50 at every length, while RNNencdec-50 falls steadily as sentences "
         "get longer; both models trained on short sentences drop beyond 20 words, the "
         "shaded region they never saw.",
     caption="The paper's Figure 2, reproduced on the toy grammar: BLEU (left) and the "
             "share of sentences translated exactly (right) against the source length, "
             "for the four committed models, 100 test sentences per length bucket. "
             "Solid lines: trained on 5-50 words; dashed: on 5-20 words (the shaded "
             "lengths were never seen in training).",
     name="fig-ch3-figure2")

md(r"""
This is the paper's result. Both models trained on 5-50 words translate short sentences
almost perfectly: on 5-9 words RNNsearch scores {glue:text}`bleu_search_short_words:.1f`
and RNNencdec {glue:text}`bleu_encdec_short_words:.1f`. As the sentences grow, the
model without attention falls: on 45-50 words RNNencdec scores
{glue:text}`bleu_encdec_long:.1f` and gets {glue:text}`exact_encdec_long`% of the
sentences exactly right, while RNNsearch scores {glue:text}`bleu_search_long:.1f` with
{glue:text}`exact_search_long`% exact, a gap of {glue:text}`bleu_gap_long:.1f` BLEU
points. Same encoder, same decoder, same training data; only the context differs.
Ninety-six numbers are enough to carry a short clause, and not enough to carry fifty
words in order. (Test sentences are generated apart from training; by chance a few of
the shortest also occur there, but none of ten words or more.)

Where the toy differs from the paper, honestly:

- **The short-trained models.** In the paper, RNNsearch-30 still beat RNNencdec-50 on
  long sentences. Here the models trained on 5-20 words fall beyond 20 words *both*, to
  {glue:text}`bleu_search20_long:.1f` (RNNsearch) and {glue:text}`bleu_encdec20_long:.1f`
  (RNNencdec) on 45-50 words. Our grammar joins clauses with "and", and a model that has
  never seen a third or fourth clause has never learned what follows one; real text
  varies within a sentence far more, so real short sentences teach more about long ones.
- **The scale.** The paper's models had about 1,000 units per layer and were trained for
  days on 348 million words of real text; ours have 48 and are trained for a minute or two of
  CPU on a grammar of about a hundred words. The grammar makes the alignment exactly knowable,
  which the paper could only show by example.
- **BLEU near 100** is easy on a toy whose translation is deterministic; the paper's best
  scores were near 28 on real news. What carries over is the *shape*: the fixed vector
  fails with length, attention does not.

## Figure 3, reproduced: the learned alignments

The paper's Figure 3 shows RNNsearch's weights $\alpha_{ij}$ for a few test sentences: an
almost diagonal map, bent where French reorders. Here is one of our test sentences of
25 to 29 words, read with teacher forcing on the reference (row $i$ is the weight
behind reference word $i$); dots mark the gold links:
""")

code(r"""
long_pair = next(p for p in tests[(25, 29)]
                 if "never" in p.source and "lot" in p.source)
alpha = forced_attention(models["rnnsearch_50"], [long_pair], src_vocab,
                         tgt_vocab)[0]
fig, ax = plt.subplots(figsize=(7.2, 6.6))
plot_weights(alpha, row_labels=long_pair.target, col_labels=long_pair.source,
             ax=ax, vmax=1.0, xlabel="English (source)", ylabel="French (target)")
mark_cells(ax, [(i, j) for j, i in long_pair.alignment], style="dot")
ax.tick_params(labelsize=8)
plt.show()
""", tags=["hide-input"],
     alt="A heat map of attention weights, French words as rows and English words as "
         "columns, for a sentence of about thirty words. Bright cells run down the "
         "diagonal, sit on the gold-link dots and step sideways where adjectives and "
         "nouns swap; the row of beaucoup is bright on the verb, away from its two "
         "gold dots on a and lot.",
     caption="The learned attention of RNNsearch-50 for a test sentence it never saw "
             "(teacher forcing on the reference). Dots: the gold links. The bright cells "
             "follow them through the adjective-noun swaps and the ne ... jamais around "
             "the verb; beaucoup, whose gold links are a and lot at the end of the "
             "clause, reads the verb instead (explained below).",
     name="fig-ch3-figure3")

md(r"""
How often does the largest weight point at the right word? The **alignment error
rate** (AER) {cite:p}`och2003` compares the predicted links $A$ (one per French word:
the English word with the largest $\alpha_{ij}$) with the gold links $G$:
$\mathrm{AER} = 1 - 2\,|A \cap G| / (|A| + |G|)$, 0 when every argmax hits a gold link.
Over all 900 test sentences, by the class of the French word:
""")

code(r"""
aer = results["rnnsearch_50"]["aer"]
classes = ["noun", "adjective", "verb", "determiner", "function"]
print_table([["AER", f"{aer['content']:.3f}", *(f"{aer[c]:.3f}" for c in classes),
              f"{aer['all']:.3f}"]], ["", "content words", *classes, "all"])
glue("aer_content", aer["content"], display=False)
glue("aer_all", aer["all"], display=False)
""")

md(r"""
On content words (nouns, adjectives and verbs) the argmax is almost always the gold
word: AER {glue:text}`aer_content:.3f`. Overall it is {glue:text}`aer_all:.3f`, and the
table says where the errors are: determiners and the function words. They are not
random. Where do these words look, if not at their gold word? A small helper names where
an argmax lands, relative to the gold links; then we count, over the test sentences of 25
to 29 words:
""")

code(r"""
def landing_of(j, gold, source):
    # Where the argmax j lands, relative to the gold source positions.
    return ("its gold word" if j in gold else "one word early" if j == min(gold) - 1
            else "the verb" if source[j] in VERBS else "elsewhere")
""")

code(r"""
pairs = tests[(25, 29)]
weights = forced_attention(models["rnnsearch_50"], pairs, src_vocab, tgt_vocab)
landing = {"determiner": Counter(), "jamais": Counter(), "beaucoup": Counter()}
for p, w in zip(pairs, weights):
    for i, (word, c) in enumerate(zip(p.target, p.classes)):
        key = "determiner" if c == "determiner" else word
        if key in landing:
            gold = [j for j, k in p.alignment if k == i]
            j = int(np.argmax(w[i]))
            landing[key][landing_of(j, gold, p.source)] += 1
columns = ["its gold word", "one word early", "the verb", "elsewhere"]
rows = [[k, sum(n.values())] + [f"{n[c] / sum(n.values()):.0%}" for c in columns]
        for k, n in landing.items()]
print_table(rows, ["French word", "count"] + columns)
""")

code(r"""
n_det = landing["determiner"]
glue("det_on_gold", round(100 * n_det["its gold word"] / sum(n_det.values())), display=False)
glue("det_early", round(100 * n_det["one word early"] / sum(n_det.values())), display=False)
n_b = landing["beaucoup"]
glue("beaucoup_verb", round(100 * n_b["the verb"] / sum(n_b.values())), display=False)
""", tags=["remove-cell"])

md(r"""
Three habits show, and none of them is noise. **Determiners** look at their own English
determiner {glue:text}`det_on_gold`% of the time; the rest, {glue:text}`det_early`%,
land exactly **one word early**: they are the first word of a new clause, and the
attention stays on "and", the word just translated. **"jamais"** often stays on the
verb it follows. And **"beaucoup"**, whose gold words "a lot" sit at the end of the
English clause, almost never looks there: {glue:text}`beaucoup_verb`% of the time its
largest weight is on the verb it comes right after.

The reason is what $h_j$ is. It is not the word $x_j$: the backward GRU's half of
$h_j$ has read every word from the end of the sentence back to $x_j$, so the state at
"and" already knows that "the" comes next, and the state at the verb already knows that
"a lot" closes the clause. The decoder can read the next determiner, or the presence of
"a lot", from the state it is already attending to, and training found no reason to
move the weight. Attention weights show where the decoder *reads*; with bidirectional
states that is close to the word alignment, and for content words it is the alignment,
but it can sit a word early, at a neighbour that already carries the information.
Because our gold links are exact, we can measure how often.

## What this changes in chapters 1 and 4

{doc}`Chapter 1 <01_bottleneck>` argued from capacity that one fixed vector must fail on
long inputs. Here that bottleneck is *measured* on trained models: RNNencdec's 96 numbers
carry short sentences and lose long ones; the attention model, same encoder, does not.

{doc}`Chapter 4 <04_qkv_alignment>` reads an English-French alignment out of attention
over pretrained word vectors, whose similarities were given. Here the alignment was
*learned*: no one told the model which words correspond; its attention found them,
reorderings included, because that made the next word easier to predict. The next
chapters keep the idea and change the score: dot products of learned queries and keys
instead of Bahdanau's small network.

## Summary

- RNNencdec and RNNsearch share a bidirectional GRU encoder, $h_j$ $(B, S, 2H)$, and a
  GRU decoder $s_i = f(s_{i-1}, y_{i-1}, c_i)$; they differ only in the context: the
  final states for every step, or $c_i = \sum_j \alpha_{ij} h_j$ with learned additive
  attention.
- Both train in NumPy with backward passes written by hand (through time and through the
  attention), Adam and gradient clipping, each gradient checked against central
  differences and against PyTorch.
- Trained live for {glue:text}`live_steps` steps, RNNsearch's attention map goes from
  uniform to the alignment on its own.
- Figure 2, reproduced: on 45-50 words, RNNsearch-50 scores
  {glue:text}`bleu_search_long:.1f` BLEU and RNNencdec-50 {glue:text}`bleu_encdec_long:.1f`,
  though both score above 95 on 5-9 words.
- Figure 3, reproduced: the attention's argmax hits the gold alignment of content words
  with AER {glue:text}`aer_content:.3f` ({glue:text}`aer_all:.3f` overall); the
  misses are habits, such as a determiner's weight staying one word early on "and",
  whose bidirectional state already knows the next word.

## Exercises

1. **Counting the bottleneck.** RNNencdec's decoder sees $2H = 96$ numbers per
   sentence. How many bits does a sentence of 50 words from this grammar carry, roughly,
   if each word is one of about 14 nouns, 8 adjectives, 10 verbs or 3 determiners? Why
   can 96 float32 numbers still not hold it for a trained GRU?
2. **Attention with the wrong state.** RNNsearch scores $h_j$ against $s_{i-1}$, the
   state *before* writing word $i$. Change one line of thought: what would go wrong if it
   used $s_i$, the state after?
3. **One word early.** Move every determiner's predicted link that lands one word early
   one word later, and compute the determiners' AER again. What remains?
4. **Greedy versus teacher forcing.** Our AER reads attention with teacher forcing on
   the reference. For the long sentence of {numref}`fig-ch3-figure3`, does the greedy
   translation equal the reference, and are its attention weights then the same?
""")

md(r"""
:::{admonition} Solution 1
:class: dropdown

A clause picks its words from small sets: roughly $\log_2 14 \approx 3.8$ bits per
noun, 3 per adjective, 3.3 per verb, 1.6 per determiner, plus a few bits of structure.
A sentence of 45-50 words carries about a hundred bits of word choices (the hidden cell
counts them), and 96 float32 numbers hold 3,072 bits: in principle plenty. But a GRU does not write bits into its state with
an optimal code; it keeps a smooth, decaying summary that it must update word by word
and read back word by word, and every later word overwrites part of the earlier ones.
Capacity in bits is not the limit; what a trained recurrent state can keep in order is.
The hidden cell computes the bits of our long test sentences.
:::
""")

code(r"""
bits = {"noun": np.log2(14), "adjective": np.log2(8), "verb": np.log2(10),
        "determiner": np.log2(3)}
per_sentence = [sum(bits.get(c, 0) for c in p.classes) for p in tests[(45, 50)]]
print(f"content of a 45-50 word sentence: about {np.mean(per_sentence):.0f} bits "
      f"of word choices, against 96 x 32 = 3072 bits of float32 state")
""", tags=["hide-cell"])

md(r"""
:::{admonition} Solution 2
:class: dropdown

$s_i$ is computed *from* $c_i$ ($s_i = f(s_{i-1}, y_{i-1}, c_i)$), so $c_i$ cannot depend
on $s_i$ without a circle. The decoder must decide where to look from what it knew
before writing word $i$: the words already written, summarised in $s_{i-1}$. ({cite:t}`luong2015`'s
later variant scores against $s_i$, but then computes its state first, without
the context, and uses the context only for the output.)
:::

:::{admonition} Solution 3
:class: dropdown

Almost nothing remains: the determiners' errors were the one-word-early links, so the
shifted links are the gold ones. The error was systematic, not a confusion, which is
why a per-class AER is worth more than one overall number. The hidden cell computes it.
:::
""")

code(r"""
shifted = []
for p, w in zip(pairs, weights):
    w = w.copy()
    for i, c in enumerate(p.classes):
        gold_j = min(j for j, k in p.alignment if k == i)
        if c == "determiner" and int(np.argmax(w[i])) == gold_j - 1:
            w[i] = np.roll(w[i], 1)              # the same weights, one word later
    shifted.append(w)
before = alignment_error_rate(pairs, weights, ["determiner"])
after = alignment_error_rate(pairs, shifted, ["determiner"])
print(f"AER of determiners: {before:.3f} as learned, {after:.3f} shifted")
""", tags=["hide-cell"])

md(r"""
:::{admonition} Solution 4
:class: dropdown

If greedy decoding writes exactly the reference, every step sees the same previous word
as under teacher forcing, so the decoder states, the contexts and the weights are the
same, step for step. The hidden cell checks it.
:::
""")

code(r"""
model = models["rnnsearch_50"]
s, n, _, _ = encode_batch([long_pair], src_vocab, tgt_vocab)
ids, greedy_alpha = model.translate(s, n)
same_words = tgt_vocab.decode(ids[0]) == list(long_pair.target)
print("greedy output equals the reference:", same_words)
if same_words:
    diff = np.abs(greedy_alpha[0, :len(long_pair.target)] - alpha).max()
    print("largest difference of the weights < 1e-9:", diff < 1e-9)
""", tags=["hide-cell"])

for c in cells:
    if c.cell_type == "code" and "remove-cell" not in c.metadata.get("tags", []):
        for line in c.source.splitlines():
            assert len(line) <= 84, f"code line wider than the column: {line}"
old = nbformat.read(PATH, as_version=4)
colab = next(c for c in old.cells if c.cell_type == "code" and "google.colab" in "".join(c.source))
cells.insert(1, colab)
nb = nbformat.v4.new_notebook()
nb.metadata = old.metadata
nb.cells = cells
nbformat.validator.normalize(nb)
nbformat.write(nb, PATH)
print(f"wrote {PATH} ({len(cells)} cells)")
