"""The file an option names: relative to the experiment folder first, then bundled."""

from pathlib import Path

import pytest

from codesign.paths import named_file


class PathError(ValueError):
    pass


def test_a_file_in_the_folder_wins_over_a_bundled_one_of_the_same_name(tmp_path):
    (tmp_path / "arm").write_text("mine")
    bundled = {"arm": Path("/bundled/arm.yaml")}
    assert named_file("robot", "arm", base_dir=tmp_path, bundled=bundled,
                      error=PathError) == tmp_path / "arm"
    assert named_file("robot", "arm", base_dir=tmp_path / "elsewhere", bundled=bundled,
                      error=PathError) == Path("/bundled/arm.yaml")


def test_an_unknown_name_raises_naming_the_option_folder_and_bundled_names(tmp_path):
    with pytest.raises(PathError, match=r"robot 'arn' is neither a file in .* nor a "
                                         r"bundled robot; bundled: \['arm', 'leg'\]"):
        named_file("robot", "arn", base_dir=tmp_path, error=PathError,
                   bundled={"leg": Path("leg.yaml"), "arm": Path("arm.yaml")})
