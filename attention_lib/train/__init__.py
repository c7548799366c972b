"""Training and measuring scripts: each writes a committed checkpoint or measurement.

They use the models of :mod:`attention_lib.models` (never the other way round:
loading a model does not import its trainer). Each runs as
``python -m attention_lib.train.<name>``:

- :mod:`attention_lib.train.seq2seq`: chapter 3's RNNencdec and RNNsearch on the
  toy grammar, scored by :mod:`attention_lib.train.evaluation` (BLEU, accuracy,
  alignment error);
- :mod:`attention_lib.train.translation`: chapter 10's Transformer and RNNsearch
  on Tatoeba English-French;
- :mod:`attention_lib.train.shakespeare`: chapter 11's character-level TinyGPT;
- :mod:`attention_lib.train.long_context` and
  :mod:`attention_lib.train.evaluate_long_context`: chapters 18 and 19's models
  of longer contexts and their measurements;
- :mod:`attention_lib.train.serving`, :mod:`attention_lib.train.ngram_draft` and
  :mod:`attention_lib.train.measure_serving`: chapter 20's cache variants,
  chapter 21's drafts, and their measurements.
"""
