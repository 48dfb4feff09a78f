"""The PyTorch frontend: an ``nn.Module`` (or a ``module:factory``) captured op by op over fake tensors
(:mod:`.dispatch`) or with ``torch.export`` (:mod:`.fx`), identical blocks folded (:mod:`.fold`); entry points in
:mod:`.export` (``load_module``, ``load_factory``) and :mod:`.live` (``graphroof.capture``).  Every module of this
package imports torch; the package itself does not.
"""
