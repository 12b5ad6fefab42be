from prism.model import tokenizer as tok


def test_specials_and_vocab():
    assert (tok.PAD, tok.BOS, tok.EOS, tok.MOD, tok.VOCAB_SIZE) == (256, 257, 258, 259, 260)


def test_round_trip_utf8():
    text = "héllo, 7"
    assert tok.decode(tok.encode(text)) == text


def test_sample_layout_and_labels():
    ids = tok.sample_ids("ab", n_modality_tokens=3, text_len=6)
    assert ids == [tok.MOD] * 3 + [tok.BOS, 97, 98, tok.EOS, tok.PAD, tok.PAD]
    labels = tok.sample_labels(ids)
    assert labels == [tok.IGNORE, tok.IGNORE, tok.BOS, 97, 98, tok.EOS, tok.IGNORE, tok.IGNORE, tok.IGNORE]


def test_long_text_is_cut_to_text_len():
    ids = tok.sample_ids("x" * 100, n_modality_tokens=2, text_len=10)
    assert len(ids) == 12 and ids[-1] == tok.EOS
