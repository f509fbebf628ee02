"""Data engineering for LLMs (Chapter 3): metrics, code evaluation, weight spectra, cleaning,
near-duplicate detection, byte-level BPE, embeddings and instruction data.

Each module holds one topic and reads on its own:

* :mod:`labs.data_eng.metrics` -- BLEU, ROUGE-N/L, perplexity and bits per character, EM/F1.
* :mod:`labs.data_eng.passk` -- the unbiased pass@k estimator and a sandboxed candidate runner.
* :mod:`labs.data_eng.spectrum` -- eigenvalue spectra of weight matrices, power-law tail fits.
* :mod:`labs.data_eng.cleaning` -- a corpus with planted problems and a rule-based cleaner.
* :mod:`labs.data_eng.minhash` -- MinHash signatures and LSH banding in numpy.
* :mod:`labs.data_eng.bpe` -- byte-level byte-pair encoding: train, encode, decode.
* :mod:`labs.data_eng.embeddings` -- skip-gram word vectors with negative sampling.
* :mod:`labs.data_eng.instruct` -- chat templates, loss masking, Cohen's kappa.
"""
