"""Input pipelines: binarized MNIST (``mnist``) and ListOps (``listops``)."""


class InvalidDataError(ValueError):
  """A data file was found but does not hold what it should; the message names the file and the
  place."""
