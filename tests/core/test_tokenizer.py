from prism.core import tokenizer as tok


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


def test_a_tokenizer_file_gets_the_layouts_specials_after_its_vocabulary(bpe_file):
    from tokenizers import Tokenizer

    base = Tokenizer.from_file(str(bpe_file)).get_vocab_size(with_added_tokens=True)
    vocab = tok.load_vocab(bpe_file)
    assert [vocab.pad, vocab.bos, vocab.eos, vocab.mod] == [base, base + 1, base + 2, base + 3]
    assert vocab.size == base + 4 and vocab.rows % 8 == 0 and vocab.rows >= vocab.size
    assert tok.load_vocab("bytes") == tok.BYTE_VOCAB and tok.BYTE_VOCAB.rows == 264


def test_a_tokenizer_files_own_specials_are_used(tmp_path, bpe_file):
    from tokenizers import Tokenizer

    t = Tokenizer.from_file(str(bpe_file))
    t.add_special_tokens(["<s>", "</s>"])
    path = tmp_path / "with_specials.json"
    t.save(str(path))
    vocab = tok.load_vocab(path)
    ids = t.get_vocab(with_added_tokens=True)
    assert (vocab.bos, vocab.eos) == (ids["<s>"], ids["</s>"])
    assert vocab.size == len(ids) + 2  # PAD and the modality token added


def test_captions_are_cut_at_a_token_boundary(bpe_file):
    encoder = tok.TextEncoder(tok.load_vocab(bpe_file))
    full = encoder.encode_batch(["a large white circle"])[0]
    assert len(full) < len("a large white circle")  # merges learnt from the captions
    cut, n, was_cut = encoder.fit("a large white circle", 2)
    assert was_cut and n == 2 and encoder.encode_batch([cut])[0] == full[:2]
    assert tok.TextEncoder(tok.BYTE_VOCAB).fit("héllo", 2) == ("h", 1, True)  # bytes: never half a character
