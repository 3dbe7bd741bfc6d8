"""Real sequence-model programs, shrunk to run in seconds, trained under hookgrad and torch.

Each program is written once against a ``torch`` module argument and run unchanged with
``hookgrad`` and with torch 2.13 from the same initial weights (torch's, copied through the
state dict); the loss curves must agree. Dropout is set to 0 (hookgrad's random numbers are
not torch's); everything else is as in the source.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import hookgrad

torch_ = pytest.importorskip("torch")


# -- pytorch/examples word_language_model/model.py + main.py (RNNModel, train loop) ------------


def word_language_model(torch, ntoken=20, ninp=16, nhid=16, nlayers=2, rnn_type="LSTM"):
    nn = torch.nn

    class RNNModel(nn.Module):
        """Container module with an encoder, a recurrent module, and a decoder."""

        def __init__(self):
            super().__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(0.0)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=0.0)
            self.decoder = nn.Linear(nhid, ntoken)
            self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers
            self.init_weights()

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output)
            decoded = decoded.view(-1, self.ntoken)
            return torch.nn.functional.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            if self.rnn_type == "LSTM":
                return (
                    weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid),
                )
            return weight.new_zeros(self.nlayers, bsz, self.nhid)

    return RNNModel()


def repackage_hidden(h, torch):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v, torch) for v in h)


def train_word_language_model(torch, model, data, bptt=5, lr=20.0, clip=0.25):
    criterion = torch.nn.NLLLoss()
    model.train()
    hidden = model.init_hidden(data.size(1))
    losses = []
    for i in range(0, data.size(0) - 1, bptt):
        seq_len = min(bptt, len(data) - 1 - i)
        source, targets = data[i : i + seq_len], data[i + 1 : i + 1 + seq_len].view(-1)
        model.zero_grad()
        hidden = repackage_hidden(hidden, torch)
        output, hidden = model(source, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        losses.append(loss.item())
    return losses


# -- PyTorch tutorial "Language Modeling with nn.Transformer and torchtext" -------------------


def transformer_tutorial_model(torch, ntoken=20, d_model=8, nhead=2, d_hid=16, nlayers=2):
    nn = torch.nn

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.0, max_len=64):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            position = torch.arange(max_len).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
            pe = torch.zeros(max_len, 1, d_model)
            pe[:, 0, 0::2] = torch.sin(position * div_term)
            pe[:, 0, 1::2] = torch.cos(position * div_term)
            self.register_buffer("pe", pe)

        def forward(self, x):
            x = x + self.pe[: x.size(0)]
            return self.dropout(x)

    class TransformerModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.model_type = "Transformer"
            self.pos_encoder = PositionalEncoding(d_model)
            encoder_layers = nn.TransformerEncoderLayer(d_model, nhead, d_hid, 0.0)
            self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers)
            self.embedding = nn.Embedding(ntoken, d_model)
            self.d_model = d_model
            self.linear = nn.Linear(d_model, ntoken)
            self.init_weights()

        def init_weights(self):
            initrange = 0.1
            self.embedding.weight.data.uniform_(-initrange, initrange)
            self.linear.bias.data.zero_()
            self.linear.weight.data.uniform_(-initrange, initrange)

        def forward(self, src, src_mask=None):
            src = self.embedding(src) * math.sqrt(self.d_model)
            src = self.pos_encoder(src)
            if src_mask is None:
                src_mask = nn.Transformer.generate_square_subsequent_mask(len(src))
            output = self.transformer_encoder(src, src_mask)
            return self.linear(output)

    return TransformerModel()


def train_transformer_tutorial(torch, model, data, bptt=5, ntokens=20):
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=5.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.95)
    model.train()
    losses = []
    for i in range(0, data.size(0) - 1, bptt):
        seq_len = min(bptt, len(data) - 1 - i)
        source, targets = data[i : i + seq_len], data[i + 1 : i + 1 + seq_len].reshape(-1)
        output = model(source)
        loss = criterion(output.view(-1, ntokens), targets)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    return losses


# -- the runs ---------------------------------------------------------------------------------


def _tokens(steps: int = 81, batch: int = 4) -> np.ndarray:
    """A learnable corpus: each column counts up by 3 (mod 20) from its own start."""
    return (np.arange(steps)[:, None] * 3 + np.arange(batch)[None, :] * 5) % 20


def _same_start(make):
    """The program's model built in both libraries, hookgrad's holding torch's weights."""
    torch_.manual_seed(0)
    reference = make(torch_)
    model = make(hookgrad)
    state = {k: hookgrad.tensor(v.detach().numpy()) for k, v in reference.state_dict().items()}
    model.load_state_dict(state)
    return model, reference


@pytest.mark.parametrize(
    ("rnn_type", "lr"),
    [("LSTM", 20.0), ("GRU", 20.0), ("RNN_TANH", 2.0)],  # 20 is the example's default
)
def test_word_language_model_trains_like_torch(rnn_type, lr):
    """pytorch/examples word_language_model (RNNModel, truncated BPTT with detached hidden
    state, gradient clipping, manual SGD): torch's loss curve."""
    kind = "RNN" if rnn_type == "RNN_TANH" else rnn_type
    model, reference = _same_start(lambda lib: word_language_model(lib, rnn_type=kind))
    data = _tokens()
    expected = train_word_language_model(torch_, reference, torch_.tensor(data), lr=lr)
    got = train_word_language_model(hookgrad, model, hookgrad.tensor(data), lr=lr)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert np.ptp(expected) > 0.01  # the updates really move the model


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")
def test_transformer_tutorial_trains_like_torch():
    """The nn.Transformer language-modelling tutorial (positional encoding buffer, causal mask,
    TransformerEncoder, SGD with StepLR and clipping): torch's loss curve."""
    model, reference = _same_start(transformer_tutorial_model)
    data = _tokens()
    expected = train_transformer_tutorial(torch_, reference, torch_.tensor(data))
    got = train_transformer_tutorial(hookgrad, model, hookgrad.tensor(data))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert expected[-1] < 0.5 * expected[0]  # the run really learns the counting corpus


# -- karpathy/nanoGPT model.py (CausalSelfAttention with the flash path, GPT, configure_optimizers)


def nano_gpt(torch, block_size=8, vocab_size=20, n_layer=2, n_head=2, n_embd=8, flash=True):
    nn = torch.nn
    F = torch.nn.functional

    class LayerNorm(nn.Module):
        """LayerNorm but with an optional bias."""

        def __init__(self, ndim, bias):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(ndim))
            self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

        def forward(self, input):
            return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=True)
            self.c_proj = nn.Linear(n_embd, n_embd, bias=True)
            self.attn_dropout = nn.Dropout(0.0)
            self.resid_dropout = nn.Dropout(0.0)
            self.n_head, self.n_embd, self.dropout = n_head, n_embd, 0.0
            self.flash = flash and hasattr(torch.nn.functional, "scaled_dot_product_attention")
            if not self.flash:
                self.register_buffer(
                    "bias",
                    torch.tril(torch.ones(block_size, block_size)).view(
                        1, 1, block_size, block_size
                    ),
                )

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            if self.flash:
                y = torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=None,
                    dropout_p=self.dropout if self.training else 0, is_causal=True,
                )  # fmt: skip
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
                att = F.softmax(att, dim=-1)
                att = self.attn_dropout(att)
                y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * n_embd, n_embd)
            self.dropout = nn.Dropout(0.0)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = LayerNorm(n_embd, bias=True)
            self.attn = CausalSelfAttention()
            self.ln_2 = LayerNorm(n_embd, bias=True)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(
                {
                    "wte": nn.Embedding(vocab_size, n_embd),
                    "wpe": nn.Embedding(block_size, n_embd),
                    "drop": nn.Dropout(0.0),
                    "h": nn.ModuleList([Block() for _ in range(n_layer)]),
                    "ln_f": LayerNorm(n_embd, bias=True),
                }
            )
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # weight tying
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            _, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            loss = F.cross_entropy(
                logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
            )
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay = [p for n, p in param_dict.items() if p.dim() < 2]
            groups = [
                {"params": decay, "weight_decay": weight_decay},
                {"params": nodecay, "weight_decay": 0.0},
            ]
            return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)

    return GPT()


def train_nano_gpt(torch, model, data, steps=12, block_size=8, batch=4):
    optimizer = model.configure_optimizers(0.1, 1e-2, (0.9, 0.95))
    losses = []
    for step in range(steps):
        ix = [(step * 7 + j * 5) % (len(data) - block_size - 1) for j in range(batch)]
        x = torch.stack([data[i : i + block_size] for i in ix])
        y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("flash", [True, False])
def test_nano_gpt_trains_like_torch(flash):
    """nanoGPT's GPT (causal self-attention through F.scaled_dot_product_attention with
    is_causal=True, or its masked-softmax fallback), weight tying, AdamW groups: torch's
    loss curve."""
    model, reference = _same_start(lambda lib: nano_gpt(lib, flash=flash))
    data = _tokens(200, 1)[:, 0]
    expected = train_nano_gpt(torch_, reference, torch_.tensor(data))
    got = train_nano_gpt(hookgrad, model, hookgrad.tensor(data))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert expected[-1] < 0.85 * expected[0]


# -- PyTorch tutorial "NLP From Scratch: Translation with a Sequence to Sequence Network and
# Attention" (EncoderRNN, BahdanauAttention, AttnDecoderRNN with teacher forcing, greedy decoding)


def seq2seq_tutorial(torch):
    nn = torch.nn
    F = torch.nn.functional
    MAX_LENGTH, SOS_token = 6, 0

    class EncoderRNN(nn.Module):
        def __init__(self, input_size, hidden_size, dropout_p=0.0):
            super().__init__()
            self.hidden_size = hidden_size
            self.embedding = nn.Embedding(input_size, hidden_size)
            self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
            self.dropout = nn.Dropout(dropout_p)

        def forward(self, input):
            embedded = self.dropout(self.embedding(input))
            output, hidden = self.gru(embedded)
            return output, hidden

    class BahdanauAttention(nn.Module):
        def __init__(self, hidden_size):
            super().__init__()
            self.Wa = nn.Linear(hidden_size, hidden_size)
            self.Ua = nn.Linear(hidden_size, hidden_size)
            self.Va = nn.Linear(hidden_size, 1)

        def forward(self, query, keys):
            scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
            scores = scores.squeeze(2).unsqueeze(1)
            weights = F.softmax(scores, dim=-1)
            context = torch.bmm(weights, keys)
            return context, weights

    class AttnDecoderRNN(nn.Module):
        def __init__(self, hidden_size, output_size, dropout_p=0.0):
            super().__init__()
            self.embedding = nn.Embedding(output_size, hidden_size)
            self.attention = BahdanauAttention(hidden_size)
            self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
            self.out = nn.Linear(hidden_size, output_size)
            self.dropout = nn.Dropout(dropout_p)

        def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
            batch_size = encoder_outputs.size(0)
            decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS_token)
            decoder_hidden = encoder_hidden
            decoder_outputs = []
            attentions = []
            for i in range(MAX_LENGTH):
                decoder_output, decoder_hidden, attn_weights = self.forward_step(
                    decoder_input, decoder_hidden, encoder_outputs
                )
                decoder_outputs.append(decoder_output)
                attentions.append(attn_weights)
                if target_tensor is not None:
                    decoder_input = target_tensor[:, i].unsqueeze(1)
                else:
                    _, topi = decoder_output.topk(1)
                    decoder_input = topi.squeeze(-1).detach()
            decoder_outputs = torch.cat(decoder_outputs, dim=1)
            decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
            attentions = torch.cat(attentions, dim=1)
            return decoder_outputs, decoder_hidden, attentions

        def forward_step(self, input, hidden, encoder_outputs):
            embedded = self.dropout(self.embedding(input))
            query = hidden.permute(1, 0, 2)
            context, attn_weights = self.attention(query, encoder_outputs)
            input_gru = torch.cat((embedded, context), dim=2)
            output, hidden = self.gru(input_gru, hidden)
            output = self.out(output)
            return output, hidden, attn_weights

    return nn.ModuleDict({"encoder": EncoderRNN(10, 8), "decoder": AttnDecoderRNN(8, 10)})


def train_seq2seq_tutorial(torch, enc, dec, x, y, steps=8):
    encoder_optimizer = torch.optim.Adam(enc.parameters(), lr=0.01)
    decoder_optimizer = torch.optim.Adam(dec.parameters(), lr=0.01)
    criterion = torch.nn.NLLLoss()
    losses = []
    for _ in range(steps):
        encoder_optimizer.zero_grad()
        decoder_optimizer.zero_grad()
        encoder_outputs, encoder_hidden = enc(x)
        decoder_outputs, _, _ = dec(encoder_outputs, encoder_hidden, y)
        loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)), y.view(-1))
        loss.backward()
        encoder_optimizer.step()
        decoder_optimizer.step()
        losses.append(loss.item())
    dec.eval()
    with torch.no_grad():
        decoded, _, _ = dec(*enc(x))  # greedy decoding through topk
    return losses, decoded.argmax(-1).tolist()


def test_seq2seq_tutorial_trains_and_decodes_like_torch():
    """The seq2seq-with-attention tutorial: torch's loss curve with teacher forcing, then
    torch's greedy (topk) decodings."""
    model, reference = _same_start(seq2seq_tutorial)
    rng = np.random.default_rng(0)
    x, y = rng.integers(1, 10, (4, 5)), rng.integers(1, 10, (4, 6))
    expected, expected_words = train_seq2seq_tutorial(
        torch_, reference["encoder"], reference["decoder"], torch_.tensor(x), torch_.tensor(y)
    )
    got, got_words = train_seq2seq_tutorial(
        hookgrad, model["encoder"], model["decoder"], hookgrad.tensor(x), hookgrad.tensor(y)
    )
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert got_words == expected_words
    assert expected[-1] < 0.9 * expected[0]


# -- PyTorch tutorial "Sequence Models and Long Short-Term Memory Networks" (LSTMTagger) -------


def lstm_tagger(torch, embedding_dim=6, hidden_dim=6, vocab_size=9, tagset_size=3):
    nn = torch.nn
    F = torch.nn.functional

    class LSTMTagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden_dim = hidden_dim
            self.word_embeddings = nn.Embedding(vocab_size, embedding_dim)
            self.lstm = nn.LSTM(embedding_dim, hidden_dim)
            self.hidden2tag = nn.Linear(hidden_dim, tagset_size)

        def forward(self, sentence):
            embeds = self.word_embeddings(sentence)
            lstm_out, _ = self.lstm(embeds.view(len(sentence), 1, -1))
            tag_space = self.hidden2tag(lstm_out.view(len(sentence), -1))
            return F.log_softmax(tag_space, dim=1)

    return LSTMTagger()


def train_lstm_tagger(torch, model, training_data, epochs=40):
    loss_function = torch.nn.NLLLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(epochs):
        for sentence, tags in training_data:
            model.zero_grad()
            tag_scores = model(torch.tensor(sentence, dtype=torch.long))
            loss = loss_function(tag_scores, torch.tensor(tags, dtype=torch.long))
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    with torch.no_grad():
        scores = model(torch.tensor(training_data[0][0], dtype=torch.long))
    return losses, scores.argmax(1).tolist()


def test_lstm_tagger_tutorial_trains_like_torch():
    """The LSTM part-of-speech tagger tutorial: torch's per-sentence losses and tags."""
    model, reference = _same_start(lstm_tagger)
    data = [([0, 1, 2, 3, 4], [0, 1, 2, 0, 1]), ([5, 6, 7, 8], [0, 1, 2, 0])]
    expected, expected_tags = train_lstm_tagger(torch_, reference, data)
    got, got_tags = train_lstm_tagger(hookgrad, model, data)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert got_tags == expected_tags
    assert expected[-1] < 0.9 * expected[1]  # the same sentence, first and last epoch
