"""Words: the text encoder and its cache, and the resolver that turns a description into classes. Imports the
packages below it.

- `encoder`: the ONNX sentence encoder;
- `encoder_cache`: its optimized session kept on disk;
- `resolver`: description -> classes and task embedding, a package of one module per rule family;
- `compounds`: two-word nouns that are no kind of their last word;
- `english_words`: real words beyond the encoder's vocabulary, never corrected as typos.
"""

__all__ = ["encoder", "encoder_cache", "resolver", "compounds", "english_words"]
