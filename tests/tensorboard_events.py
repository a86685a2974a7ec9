"""Reads TensorBoard event files, for tests (no TensorBoard needed)."""

import pathlib


def events(run_dir: pathlib.Path):
  """The Event protos of a TensorBoard run directory, files in name order (the order they were
  opened), each file's events in the order written (TFRecord framing: length, CRC, data, CRC)."""
  from tensorboardX.proto import event_pb2

  for file in sorted(run_dir.glob("events.out.tfevents.*")):
    data, offset = file.read_bytes(), 0
    while offset < len(data):
      length = int.from_bytes(data[offset : offset + 8], "little")
      yield event_pb2.Event.FromString(data[offset + 12 : offset + 12 + length])
      offset += 12 + length + 4
