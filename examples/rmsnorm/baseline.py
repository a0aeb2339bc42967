"""A baseline of your own for rmsnorm.yaml: PyTorch's RMSNorm, which `workbench compare` times
beside the tuned kernel with the same inputs and protocol, and checks against the same
reference. It gets the inputs by name as CuPy arrays on the GPU and may return a CuPy array or
a CUDA tensor."""


def torch_rmsnorm(x, w, eps):  # CuPy arrays (and a float) in, a CUDA tensor out
    import torch  # (imported here: the space file loads on machines without PyTorch)

    xt = torch.as_tensor(x, device="cuda")  # reads the CuPy array in place (no copy)
    wt = torch.as_tensor(w, device="cuda")
    return torch.nn.functional.rms_norm(xt, (xt.shape[-1],), weight=wt, eps=float(eps))
