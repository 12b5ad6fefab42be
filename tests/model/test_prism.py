import pytest
import torch

from prism.core.errors import PrismError
from prism.core.families import FAMILIES
from prism.core.tokenizer import MOD, sample_ids, sample_labels
from prism.model.prism import build_model


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def padded_batch(spec, texts):
    ids = [sample_ids(t, spec.n_modality_tokens, spec.text_len) for t in texts]
    tokens = torch.tensor(ids)
    labels = torch.tensor([sample_labels(i) for i in ids])
    return tokens, torch.rand(len(texts), *spec.modality_shape), labels


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_family_forward_backward(family):
    spec = FAMILIES[family]
    model = build_model(family, "30k", "BASE", "e2e")
    feats = model.encoder(torch.rand(3, *spec.modality_shape))
    assert feats.shape == (3, spec.n_modality_tokens, spec.encoder_width)
    assert model.projector(feats).shape == (3, spec.n_modality_tokens, model.backbone_config.d_model)
    tokens, modality, labels = padded_batch(spec, ["a cat", "two dogs", ""])
    loss = model(tokens, modality, labels)
    assert loss.ndim == 0 and torch.isfinite(loss)
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
    assert model.encoder.pos.grad.abs().sum() > 0  # gradients reach the encoder through the MOD slots


def test_modality_features_fill_mod_slots_in_row_major_order(monkeypatch):
    spec = FAMILIES["text_ts"]
    model = build_model("text_ts", "30k", "BASE", "e2e")
    n = spec.n_modality_tokens
    # A packed row holding two samples, then a row with one: S = 3 in row-major order.
    row0 = sample_ids("ab", n, 4) + sample_ids("cd", n, 4)
    row1 = sample_ids("ef", n, 4) + [256] * (n + 4)
    tokens = torch.tensor([row0, row1])
    labels = torch.tensor([sample_labels(row0), sample_labels(row1)])
    modality = torch.rand(3, *spec.modality_shape)
    seen = {}

    def capture(x, segment_ids=None):
        seen["x"] = x
        return torch.zeros(*x.shape[:2], 264)

    monkeypatch.setattr(model.backbone, "forward_embeddings", capture)
    model(tokens, modality, labels)
    feats = model.projector(model.encoder(modality))
    x = seen["x"]
    torch.testing.assert_close(x[0, :n], feats[0])
    torch.testing.assert_close(x[0, n + 4 : 2 * n + 4], feats[1])
    torch.testing.assert_close(x[1, :n], feats[2])
    torch.testing.assert_close(x[0, n], model.backbone.embed_tokens.weight[257])  # BOS stays a token embedding


def test_mod_slot_count_mismatch_is_an_error():
    spec = FAMILIES["text_image"]
    model = build_model("text_image", "30k", "BASE", "e2e")
    tokens, modality, labels = padded_batch(spec, ["a", "b"])
    with pytest.raises(ValueError, match="MOD slots"):
        model(tokens, modality[:1], labels)


def test_loss_is_mean_cross_entropy_over_labelled_positions_and_uses_modality(monkeypatch):
    spec = FAMILIES["text_image"]
    model = build_model("text_image", "30k", "BASE", "e2e")
    tokens, modality, labels = padded_batch(spec, ["seven", "a long caption of a digit"])
    assert (labels == -100).any() and (tokens == MOD).sum() == 2 * spec.n_modality_tokens
    original, seen = model.backbone.forward_embeddings, {}

    def capture(x, segment_ids=None):
        seen["logits"] = original(x)
        return seen["logits"]

    monkeypatch.setattr(model.backbone, "forward_embeddings", capture)
    loss = model(tokens, modality, labels)
    keep = labels != -100
    expected = torch.nn.functional.cross_entropy(seen["logits"][keep], labels[keep])
    torch.testing.assert_close(loss, expected)
    assert not torch.allclose(loss, model(tokens, torch.rand_like(modality), labels))


@pytest.mark.parametrize(
    "regime,trained",
    [
        ("projector_only", {"projector"}),
        ("encoder_projector", {"encoder", "projector"}),
        ("e2e", {"backbone", "encoder", "projector"}),
    ],
)
def test_regimes_freeze_the_other_parts(regime, trained):
    spec = FAMILIES["text_graph"]
    model = build_model("text_graph", "30k", "BASE", regime)
    for part in ("backbone", "encoder", "projector"):
        flags = {p.requires_grad for p in getattr(model, part).parameters()}
        assert flags == {part in trained}, part
    trainable = model.trainable_parameters()
    expected = [p for part in trained for p in getattr(model, part).parameters()]
    assert {id(p) for p in trainable} == {id(p) for p in expected}
    model(*padded_batch(spec, ["a triangle"])).backward()
    for part in ("backbone", "encoder", "projector"):
        got = {p.grad is not None for p in getattr(model, part).parameters()}
        assert got == {part in trained}, part


def test_blocks_are_the_backbone_blocks():
    model = build_model("text_image", "60k", "BASE", "e2e")
    assert model.blocks is model.backbone.blocks and len(model.blocks) == 2


def test_meta_build_allocates_nothing():
    model = build_model("text_image", "7b", "W4X", "e2e", device="meta")
    assert all(p.device.type == "meta" for p in model.parameters())


@pytest.mark.parametrize(
    "args,kind",
    [
        (("nope", "30k", "BASE", "e2e"), "family"),
        (("text_image", "nope", "BASE", "e2e"), "backbone"),
        (("text_image", "30k", "nope", "e2e"), "projector variant"),
        (("text_image", "30k", "BASE", "nope"), "regime"),
    ],
)
def test_bad_names(args, kind):
    with pytest.raises(PrismError, match=f"unknown {kind} 'nope'"):
        build_model(*args)


def _only(labels: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return torch.where(keep, labels, torch.full_like(labels, -100))


@pytest.mark.parametrize("family", ["text_image", "text_ts"])
def test_a_packed_sample_has_the_loss_it_has_alone(family):
    """Block-diagonal attention: a sample packed behind others gets its padded-row loss."""
    import numpy as np

    from prism.data.packing import labels_for, packed, padded, sample_table

    spec = FAMILIES[family]
    model = build_model(family, "30k", "BASE", "e2e")
    with torch.no_grad():  # sharper attention than at initialisation, so leaking across samples shows
        for p in model.backbone.parameters():
            if p.ndim == 2:
                p.normal_(std=0.3)
    captions = ["a digit 3, thin", "seven", "zero, drawn wide and round"]
    table, lengths = sample_table(captions, np.ones(3, bool), spec.n_modality_tokens, spec.tokens_per_sample)
    seq_len = int(lengths.sum()) + 5  # all three in one row, then padding
    idx = np.arange(3)
    offsets = np.r_[0, np.cumsum(lengths)[:-1]]
    tokens, segments = packed(table, lengths, idx, np.zeros(3, np.int64), offsets, 1, seq_len)
    tokens, segments = torch.from_numpy(tokens), torch.from_numpy(segments)
    labels = torch.from_numpy(labels_for(tokens.numpy()))
    modality = torch.rand(3, *spec.modality_shape)
    for i in range(3):
        alone = torch.from_numpy(padded(table, idx[i : i + 1], spec.tokens_per_sample))
        want = model(alone, modality[i : i + 1], torch.from_numpy(labels_for(alone.numpy())))
        got = model(tokens, modality, _only(labels, segments == i + 1), segment_ids=segments)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        if i:  # without the mask the later samples see the earlier ones: the test can tell
            leaky = model(tokens, modality, _only(labels, segments == i + 1))
            assert abs((leaky - want).detach().item()) > 1e-3


def test_packed_gradients_match_the_samples_alone():
    """The same holds for the gradient: a packed row trains like its samples in separate rows."""
    import numpy as np

    from prism.data.packing import labels_for, packed, padded, sample_table

    spec = FAMILIES["text_image"]
    model = build_model("text_image", "30k", "BASE", "e2e")
    table, lengths = sample_table(
        ["one", "twenty two"], np.ones(2, bool), spec.n_modality_tokens, spec.tokens_per_sample
    )
    idx = np.arange(2)
    tokens, segments = packed(table, lengths, idx, np.zeros(2, np.int64), np.r_[0, lengths[0]], 1, int(lengths.sum()))
    tokens, segments = torch.from_numpy(tokens), torch.from_numpy(segments)
    modality = torch.rand(2, *spec.modality_shape)
    labels = torch.from_numpy(labels_for(tokens.numpy()))
    n_packed = (labels != -100).sum()
    (model(tokens, modality, labels, segment_ids=segments) * n_packed).backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    rows = torch.from_numpy(padded(table, idx, spec.tokens_per_sample))
    rows_labels = torch.from_numpy(labels_for(rows.numpy()))
    # Padded rows end each sample with EOS -> PAD (no loss); packed, the first sample's EOS predicts
    # the next sample's MOD (no loss either): the same labelled positions, so the sums compare.
    assert int((rows_labels != -100).sum()) == int(n_packed)
    (model(rows, modality, rows_labels) * n_packed).backward()
    for n, p in model.named_parameters():
        torch.testing.assert_close(got[n], p.grad, rtol=1e-4, atol=1e-5, msg=n)


@pytest.mark.parametrize("family", ["text_image", "text_ts", "text_video"])
def test_patch_embeddings_are_the_convolution_they_hold(family):
    """The patch embedding runs as a matmul on patches, with the same sums as its convolution."""
    from prism.model.encoders import build_encoder

    spec = FAMILIES[family]
    encoder = build_encoder(spec)
    x = torch.randn(5, *spec.modality_shape)
    conv = encoder.patch(x.transpose(1, 2) if family == "text_video" else x)
    torch.testing.assert_close(encoder.tokenize(x), conv.flatten(2).transpose(1, 2))


def test_per_position_losses_average_to_the_loss():
    spec = FAMILIES["text_image"]
    model = build_model("text_image", "30k", "BASE", "e2e")
    tokens, modality, labels = padded_batch(spec, ["a cat", "two dogs"])
    per = model(tokens, modality, labels, reduction="none")
    assert per.shape == labels.shape and bool((per[labels == -100] == 0).all())
    torch.testing.assert_close(per.sum() / (labels != -100).sum(), model(tokens, modality, labels))
