"""spro/practical-pytorch, char-rnn-classification/data.py, model.py and train.py @c520c52: an RNN
written as two Linears over torch.cat((input, hidden), 1) with nn.LogSoftmax() without dim,
one-hot lineToTensor filled by tensor[li][0][i] = 1, Variable, stepping letter by letter,
NLLLoss, SGD, output.data.topk(1), torch.save (shrunk: 3 made-up languages
of 50 names, 300 iterations; loss.data[0] read as loss.item() as torch 0.4 requires;
the state_dict saved, as a class defined in main() cannot be pickled)."""

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
            import os as _os

            _os.makedirs(_workdir + "/data/names")
            for _lang, _letters in [
                ("English", "abdehilmnorstwy"),
                ("Italian", "aceilmnoprstuz"),
                ("Japanese", "aehikmnorstuy"),
            ]:
                with open(_workdir + "/data/names/" + _lang + ".txt", "w") as _f:
                    _f.write(
                        "\n".join(
                            _random.choice("ABCDKMST")
                            + "".join(
                                _random.choice(_letters) for _ in range(_random.randint(3, 8))
                            )
                            for _ in range(50)
                        )
                    )
            import glob
            import string
            import unicodedata

            all_letters = string.ascii_letters + " .,;'-"
            n_letters = len(all_letters)

            def findFiles(path):
                return glob.glob(path)

            # Turn a Unicode string to plain ASCII, thanks to http://stackoverflow.com/a/518232/2809427
            def unicodeToAscii(s):
                return "".join(
                    c
                    for c in unicodedata.normalize("NFD", s)
                    if unicodedata.category(c) != "Mn" and c in all_letters
                )

            # Read a file and split into lines
            def readLines(filename):
                lines = open(filename).read().strip().split("\n")
                return [unicodeToAscii(line) for line in lines]

            # Build the category_lines dictionary, a list of lines per category
            category_lines = {}
            all_categories = []
            for filename in findFiles(_workdir + "/data/names/*.txt"):
                category = filename.split("/")[-1].split(".")[0]
                all_categories.append(category)
                lines = readLines(filename)
                category_lines[category] = lines

            n_categories = len(all_categories)

            # Find letter index from all_letters, e.g. "a" = 0
            def letterToIndex(letter):
                return all_letters.find(letter)

            # Turn a line into a <line_length x 1 x n_letters>,
            # or an array of one-hot letter vectors
            def lineToTensor(line):
                tensor = torch.zeros(len(line), 1, n_letters)
                for li, letter in enumerate(line):
                    tensor[li][0][letterToIndex(letter)] = 1
                return tensor

            import torch.nn as nn
            from torch.autograd import Variable

            class RNN(nn.Module):
                def __init__(self, input_size, hidden_size, output_size):
                    super(RNN, self).__init__()

                    self.hidden_size = hidden_size

                    self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
                    self.i2o = nn.Linear(input_size + hidden_size, output_size)
                    self.softmax = nn.LogSoftmax()

                def forward(self, input, hidden):
                    combined = torch.cat((input, hidden), 1)
                    hidden = self.i2h(combined)
                    output = self.i2o(combined)
                    output = self.softmax(output)
                    return output, hidden

                def initHidden(self):
                    return Variable(torch.zeros(1, self.hidden_size))

            import math
            import random
            import time

            n_hidden = 128
            n_epochs = 300
            print_every = 50
            plot_every = 100
            learning_rate = (
                0.005  # If you set this too high, it might explode. If too low, it might not learn
            )

            def categoryFromOutput(output):
                top_n, top_i = output.data.topk(1)  # Tensor out of Variable with .data
                category_i = top_i[0][0]
                return all_categories[category_i], category_i

            def randomChoice(l):
                return l[random.randint(0, len(l) - 1)]

            def randomTrainingPair():
                category = randomChoice(all_categories)
                line = randomChoice(category_lines[category])
                category_tensor = Variable(torch.LongTensor([all_categories.index(category)]))
                line_tensor = Variable(lineToTensor(line))
                return category, line, category_tensor, line_tensor

            rnn = RNN(n_letters, n_hidden, n_categories)
            optimizer = torch.optim.SGD(rnn.parameters(), lr=learning_rate)
            criterion = nn.NLLLoss()

            def train(category_tensor, line_tensor):
                hidden = rnn.initHidden()
                optimizer.zero_grad()

                for i in range(line_tensor.size()[0]):
                    output, hidden = rnn(line_tensor[i], hidden)

                loss = criterion(output, category_tensor)
                loss.backward()

                optimizer.step()

                return output, loss.item()

            # Keep track of losses for plotting
            current_loss = 0
            all_losses = []

            def timeSince(since):
                now = time.time()
                s = now - since
                m = math.floor(s / 60)
                s -= m * 60
                return "%dm %ds" % (m, s)

            start = time.time()

            for epoch in range(1, n_epochs + 1):
                category, line, category_tensor, line_tensor = randomTrainingPair()
                output, loss = train(category_tensor, line_tensor)
                current_loss += loss

                # Print epoch number, loss, name and guess
                if epoch % print_every == 0:
                    guess, guess_i = categoryFromOutput(output)
                    correct = "✓" if guess == category else "✗ (%s)" % category
                    print(
                        "%d %d%% %.4f %s / %s %s"
                        % (epoch, epoch / n_epochs * 100, loss, line, guess, correct)
                    )

                # Add current loss avg to list of losses
                if epoch % plot_every == 0:
                    all_losses.append(current_loss / plot_every)
                    current_loss = 0

            torch.save(rnn.state_dict(), "char-rnn-classification.pt")

            print(all_losses)
        finally:
            _os.chdir(_cwd)

    return record
