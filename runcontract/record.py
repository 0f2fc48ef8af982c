"""The base of meta.json's records: fields only as declared, checked when set as well as when
read, so that a record the testbed writes is one every reader can parse."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
