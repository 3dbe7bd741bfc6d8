"""d2l-ai/d2l-en, chapter_linear-regression/linear-regression-scratch (PyTorch version):
synthetic_data with torch.normal, a data_iter shuffled with Python's random, linreg,
squared_loss and a hand-written minibatch sgd (shrunk: 200 examples, 3 epochs)."""

import random


def main(torch):
    def synthetic_data(w, b, num_examples):
        X = torch.normal(0, 1, (num_examples, len(w)))
        y = torch.matmul(X, w) + b
        y += torch.normal(0, 0.01, y.shape)
        return X, y.reshape((-1, 1))

    def data_iter(batch_size, features, labels):
        num_examples = len(features)
        indices = list(range(num_examples))
        random.shuffle(indices)
        for i in range(0, num_examples, batch_size):
            batch_indices = torch.tensor(indices[i : min(i + batch_size, num_examples)])
            yield features[batch_indices], labels[batch_indices]

    def linreg(X, w, b):
        return torch.matmul(X, w) + b

    def squared_loss(y_hat, y):
        return (y_hat - y.reshape(y_hat.shape)) ** 2 / 2

    def sgd(params, lr, batch_size):
        with torch.no_grad():
            for param in params:
                param -= lr * param.grad / batch_size
                param.grad.zero_()

    torch.manual_seed(0)
    random.seed(0)
    true_w = torch.tensor([2, -3.4])
    true_b = 4.2
    features, labels = synthetic_data(true_w, true_b, 200)
    w = torch.normal(0, 0.01, size=(2, 1), requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    lr, num_epochs, batch_size = 0.03, 3, 10
    history = []
    for epoch in range(num_epochs):
        for X, y in data_iter(batch_size, features, labels):
            l = squared_loss(linreg(X, w, b), y)
            l.sum().backward()
            sgd([w, b], lr, batch_size)
        with torch.no_grad():
            train_l = squared_loss(linreg(features, w, b), labels)
            history.append(float(train_l.mean()))
    return history + w.reshape(-1).tolist() + b.tolist()
