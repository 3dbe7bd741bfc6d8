"""pytorch/examples, word_language_model/main.py's training step pattern on a small MLP:
clip_grad_norm_ before a hand-written update (p.data.add_(p.grad, alpha=-lr)), the learning
rate divided by 4 when the validation loss stops improving; then the same model with
optim.SGD, two parameter groups (no weight decay on biases) and lr_scheduler.StepLR
(shrunk: 12 steps each)."""


def main(torch):
    import torch.nn as nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 20), nn.Tanh(), nn.Linear(20, 10))
    x, y = torch.randn(24, 10), torch.randn(24, 10)
    x_val, y_val = torch.randn(8, 10), torch.randn(8, 10)
    criterion = nn.MSELoss()
    lr, clip = 2.0, 0.25
    best_val_loss = None
    history = []
    for step in range(12):
        model.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        with torch.no_grad():
            val_loss = criterion(model(x_val), y_val).item()
        if not best_val_loss or val_loss < best_val_loss:
            best_val_loss = val_loss
        else:
            lr /= 4.0
        history += [loss.item(), float(norm), val_loss, lr]

    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if name.endswith("bias") else decay).append(param)
    optimizer = torch.optim.SGD(
        [{"params": decay, "weight_decay": 1e-2}, {"params": no_decay, "weight_decay": 0.0}],
        lr=0.1,
        momentum=0.9,
    )
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)
    for step in range(12):
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        history += [loss.item(), scheduler.get_last_lr()[0]]
    return history
