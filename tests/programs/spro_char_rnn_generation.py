"""spro/practical-pytorch, char-rnn-generation/helpers.py, model.py, generate.py and train.py @c520c52:
an Embedding-GRU(2 layers)-Linear character model stepped one character at a time, the loss
summed over the chunk from 0, Adam, decoder.zero_grad(), sampling with output.data.view(-1)
.div(temperature).exp() and torch.multinomial, torch.save (shrunk: a
400-word made-up text, chunks of 20, 30 epochs, hidden 24; loss.data[0] read as loss.item()
and the target of each step given its batch dimension, as torch 0.4 requires; the state_dict saved)."""

from _printed import recording_print


def main(torch):
    record = []

    print = recording_print(record)

    import random as _random

    import numpy as _np

    _random.seed(0)
    _np.random.seed(0)
    torch.manual_seed(0)
    import os as _os
    import tempfile as _tempfile

    _cwd = _os.getcwd()
    with _tempfile.TemporaryDirectory() as _tmp:
        _os.chdir(_tmp)
        try:
            _workdir = "."
            with open(_workdir + "/input.txt", "w") as _f:
                _f.write(
                    " ".join(
                        _random.choice(
                            [
                                "the",
                                "quick",
                                "brown",
                                "fox",
                                "jumps",
                                "over",
                                "lazy",
                                "dog",
                                "When",
                                "forty",
                            ]
                        )
                        for _ in range(400)
                    )
                )

            class unidecode:  # the file is ASCII already
                unidecode = staticmethod(lambda s: s)

            # https://github.com/spro/practical-pytorch

            import math
            import random
            import string
            import time

            from torch.autograd import Variable

            # Reading and un-unicode-encoding data

            all_characters = string.printable
            n_characters = len(all_characters)

            def read_file(filename):
                file = unidecode.unidecode(open(filename).read())
                return file, len(file)

            # Turning a string into a tensor

            def char_tensor(string):
                tensor = torch.zeros(len(string)).long()
                for c in range(len(string)):
                    tensor[c] = all_characters.index(string[c])
                return Variable(tensor)

            # Readable time elapsed

            def time_since(since):
                s = time.time() - since
                m = math.floor(s / 60)
                s -= m * 60
                return "%dm %ds" % (m, s)

            # https://github.com/spro/practical-pytorch

            import torch.nn as nn

            class RNN(nn.Module):
                def __init__(self, input_size, hidden_size, output_size, n_layers=1):
                    super(RNN, self).__init__()
                    self.input_size = input_size
                    self.hidden_size = hidden_size
                    self.output_size = output_size
                    self.n_layers = n_layers

                    self.encoder = nn.Embedding(input_size, hidden_size)
                    self.gru = nn.GRU(hidden_size, hidden_size, n_layers)
                    self.decoder = nn.Linear(hidden_size, output_size)

                def forward(self, input, hidden):
                    input = self.encoder(input.view(1, -1))
                    output, hidden = self.gru(input.view(1, 1, -1), hidden)
                    output = self.decoder(output.view(1, -1))
                    return output, hidden

                def init_hidden(self):
                    return Variable(torch.zeros(self.n_layers, 1, self.hidden_size))

            # https://github.com/spro/practical-pytorch

            def generate(decoder, prime_str="A", predict_len=100, temperature=0.8):
                hidden = decoder.init_hidden()
                prime_input = char_tensor(prime_str)
                predicted = prime_str

                # Use priming string to "build up" hidden state
                for p in range(len(prime_str) - 1):
                    _, hidden = decoder(prime_input[p], hidden)

                inp = prime_input[-1]

                for p in range(predict_len):
                    output, hidden = decoder(inp, hidden)

                    # Sample from the network as a multinomial distribution
                    output_dist = output.data.view(-1).div(temperature).exp()
                    top_i = torch.multinomial(output_dist, 1)[0]

                    # Add predicted character to string and use as next input
                    predicted_char = all_characters[top_i]
                    predicted += predicted_char
                    inp = char_tensor(predicted_char)

                return predicted

            if False:
                import argparse

                argparser = argparse.ArgumentParser()
                argparser.add_argument("filename", type=str)
                argparser.add_argument("-p", "--prime_str", type=str, default="A")
                argparser.add_argument("-l", "--predict_len", type=int, default=100)
                argparser.add_argument("-t", "--temperature", type=float, default=0.8)
                args = argparser.parse_args()

                decoder = torch.load(args.filename)
                del args.filename
                print(generate(decoder, **vars(args)))

            # https://github.com/spro/practical-pytorch

            import argparse
            import os

            import torch.nn as nn

            # Parse command line arguments
            argparser = argparse.ArgumentParser()
            argparser.add_argument("filename", type=str)
            argparser.add_argument("--n_epochs", type=int, default=2000)
            argparser.add_argument("--print_every", type=int, default=100)
            argparser.add_argument("--hidden_size", type=int, default=50)
            argparser.add_argument("--n_layers", type=int, default=2)
            argparser.add_argument("--learning_rate", type=float, default=0.01)
            argparser.add_argument("--chunk_len", type=int, default=200)
            args = argparser.parse_args(
                [
                    _workdir + "/input.txt",
                    "--n_epochs",
                    "30",
                    "--print_every",
                    "10",
                    "--hidden_size",
                    "24",
                    "--chunk_len",
                    "20",
                ]
            )

            file, file_len = read_file(args.filename)

            def random_training_set(chunk_len):
                start_index = random.randint(0, file_len - chunk_len)
                end_index = start_index + chunk_len + 1
                chunk = file[start_index:end_index]
                inp = char_tensor(chunk[:-1])
                target = char_tensor(chunk[1:])
                return inp, target

            decoder = RNN(n_characters, args.hidden_size, n_characters, args.n_layers)
            decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=args.learning_rate)
            criterion = nn.CrossEntropyLoss()

            start = time.time()
            all_losses = []
            loss_avg = 0

            def train(inp, target):
                hidden = decoder.init_hidden()
                decoder.zero_grad()
                loss = 0

                for c in range(args.chunk_len):
                    output, hidden = decoder(inp[c], hidden)
                    loss += criterion(output, target[c].unsqueeze(0))

                loss.backward()
                decoder_optimizer.step()

                return loss.item() / args.chunk_len

            def save():
                save_filename = os.path.splitext(os.path.basename(args.filename))[0] + ".pt"
                torch.save(decoder.state_dict(), save_filename)
                print("Saved as %s" % save_filename)

            try:
                print("Training for %d epochs..." % args.n_epochs)
                for epoch in range(1, args.n_epochs + 1):
                    loss = train(*random_training_set(args.chunk_len))
                    loss_avg += loss

                    if epoch % args.print_every == 0:
                        print("[(%d %d%%) %.4f]" % (epoch, epoch / args.n_epochs * 100, loss))
                        print(generate(decoder, "Wh", 40), "\n")

                print("Saving...")
                save()

            except KeyboardInterrupt:
                print("Saving before quit...")
                save()

        finally:
            _os.chdir(_cwd)

    return record
