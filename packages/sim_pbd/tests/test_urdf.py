"""URDF import: Baxter against Pinocchio, merging by hand, and hostile or broken input."""

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from sim_pbd.model import JOINT_TYPES
from sim_pbd.urdf import URDFError, load_urdf

BAXTER = Path(__file__).parents[1] / "src" / "sim_pbd" / "examples" / "baxter" / "baxter.urdf"
LEFT_ARM = ["left_s0", "left_s1", "left_e0", "left_e1", "left_w0", "left_w1", "left_w2"]


def robot(*parts: str) -> str:
    """A URDF document of the given elements."""
    return "<robot name='test'>" + "".join(parts) + "</robot>"


def link(name: str, mass: float = 1.0, inertia: str = "0.1 0 0 0.1 0 0.1",
         origin: str = "") -> str:
    """A link with an inertial (``inertia``: ixx ixy ixz iyy iyz izz)."""
    values = dict(zip(("ixx", "ixy", "ixz", "iyy", "iyz", "izz"), inertia.split(),
                      strict=True))
    attributes = " ".join(f"{key}='{value}'" for key, value in values.items())
    return (f"<link name='{name}'><inertial>{origin}<mass value='{mass}'/>"
            f"<inertia {attributes}/></inertial></link>")


def joint(name: str, parent: str, child: str, kind: str = "revolute", xyz: str = "0 0 0",
          rpy: str = "0 0 0", axis: str = "0 0 1", extra: str = "") -> str:
    limit = "<limit lower='-1' upper='1' effort='1' velocity='1'/>" \
        if kind in ("revolute", "prismatic") else ""
    return (f"<joint name='{name}' type='{kind}'><origin xyz='{xyz}' rpy='{rpy}'/>"
            f"<axis xyz='{axis}'/><parent link='{parent}'/><child link='{child}'/>{limit}"
            f"{extra}</joint>")


def chain(*extra: str) -> str:
    """A fixed base and two revolute links."""
    return robot("<link name='base'/>", link("a"), link("b"),
                 joint("j1", "base", "a", xyz="0 0 1"), joint("j2", "a", "b", xyz="1 0 0"),
                 *extra)


# -- against the reference library -----------------------------------------------------------


def _assert_matches_pinocchio(model, reference):
    """Per joint: the child link's merged mass, COM and inertia, and the joint's placement
    in its parent's frame, axis, limits and damping, as Pinocchio's model has them."""
    pin = pytest.importorskip("pinocchio")
    assert model.joint_count == reference.njoints - 1
    for i, name in enumerate(model.joint_names):
        index = reference.getJointId(name)
        body = reference.inertias[index]
        assert model.link_mass[i] == pytest.approx(body.mass, rel=1e-14)
        # the child's link frame is the joint frame; the body frame sits at its COM
        np.testing.assert_allclose(-model.joint_child_x[i], body.lever, atol=1e-14)
        np.testing.assert_allclose(model.joint_child_q[i], [1, 0, 0, 0])
        np.testing.assert_allclose(model.link_inertia[i], body.inertia, atol=1e-15)
        parent = model.joint_parent[i]
        placement = reference.jointPlacements[index]
        offset = 0.0 if parent < 0 else -model.joint_child_x[parent]  # parent COM -> frame
        np.testing.assert_allclose(model.joint_parent_x[i] + offset, placement.translation,
                                   atol=1e-14)
        quaternion = pin.Quaternion(placement.rotation)  # (x, y, z, w) in coeffs()
        w, x, y, z = model.joint_parent_q[i]
        np.testing.assert_allclose(abs(np.dot([x, y, z, w], quaternion.coeffs())), 1.0,
                                   atol=1e-14)
        assert reference.names[reference.parents[index]] == \
            ("universe" if parent < 0 else model.joint_names[parent])
        joint_model = reference.joints[index]
        np.testing.assert_allclose(model.joint_lower[i],
                                   reference.lowerPositionLimit[joint_model.idx_q])
        np.testing.assert_allclose(model.joint_upper[i],
                                   reference.upperPositionLimit[joint_model.idx_q])
        np.testing.assert_allclose(model.joint_damping[i], reference.damping[joint_model.idx_v])


def test_baxter_left_arm_matches_pinocchio_reduced_model(reference):
    expected = reference.reduced_baxter(LEFT_ARM)
    model = load_urdf(BAXTER, joints=LEFT_ARM)
    assert model.joint_names == tuple(LEFT_ARM)
    _assert_matches_pinocchio(model, expected)


def test_baxter_whole_robot_matches_pinocchio(reference):
    expected = reference.baxter_model()
    model = load_urdf(BAXTER)
    assert model.joint_names[0] == "head_pan" and model.joint_count == 15
    _assert_matches_pinocchio(model, expected)


def test_frozen_joints_at_nonzero_positions_match_pinocchio(reference):
    kept = ["left_s0", "left_e1", "left_w2"]
    frozen = {"left_s1": -0.6, "left_e0": 0.4, "left_w0": 1.1, "left_w1": -0.3}
    expected = reference.reduced_baxter(kept, frozen)
    model = load_urdf(BAXTER, joints=kept, initial_positions={**frozen, "left_e1": 0.2})
    _assert_matches_pinocchio(model, expected)
    np.testing.assert_allclose(model.joint_rest, [0.0, 0.2, 0.0])


# -- Baxter, by hand --------------------------------------------------------------------------


def test_baxter_left_arm_merged_masses():
    model = load_urdf(BAXTER, joints=LEFT_ARM)
    assert model.link_names == ("left_upper_shoulder", "left_lower_shoulder",
                                "left_upper_elbow", "left_lower_elbow", "left_upper_forearm",
                                "left_lower_forearm", "left_wrist")
    # the URDF's masses plus its 0.0001 kg placeholders on fixed joints: the elbow and
    # forearm visuals, and the hand with its six sensor and gripper frames on the wrist
    np.testing.assert_allclose(model.link_mass, [5.70044, 3.22698 + 1e-4, 4.31272,
                                                 2.07206 + 1e-4, 2.24665 + 1e-4, 1.60979,
                                                 0.35093 + 0.19125 + 6e-4], rtol=1e-14)
    np.testing.assert_array_equal(model.joint_parent, [-1, 0, 1, 2, 3, 4, 5])
    np.testing.assert_allclose(model.joint_damping, 0.7)
    np.testing.assert_allclose(model.joint_lower[1], -2.147)
    np.testing.assert_allclose(model.joint_upper[1], 1.047)
    np.testing.assert_allclose(model.joint_axis, np.tile([0, 0, 1], (7, 1)))
    np.testing.assert_allclose(model.gravity, [0, 0, -9.81])  # the Gazebo tags say 0


def test_baxter_base_link_and_floating_base():
    model = load_urdf(BAXTER, joints=LEFT_ARM, base_link="left_arm_mount")
    np.testing.assert_allclose(model.joint_parent_x[0], [0.055695, 0, 0.011038], atol=1e-15)
    np.testing.assert_allclose(model.joint_parent_q[0], [1, 0, 0, 0], atol=1e-15)
    floating = load_urdf(BAXTER, joints=LEFT_ARM, floating_base=True)
    assert floating.floating_base and floating.link_names[0] == "base"
    np.testing.assert_array_equal(floating.joint_parent, [0, 1, 2, 3, 4, 5, 6])
    root = ET.parse(BAXTER).getroot()
    total = sum(float(element.find("inertial/mass").get("value"))
                for element in root.findall("link") if element.find("inertial") is not None)
    assert floating.link_mass.sum() == pytest.approx(total, rel=1e-14)
    with pytest.raises(URDFError, match="below the kept joint 'left_w2'"):
        load_urdf(BAXTER, joints=LEFT_ARM, base_link="left_wrist")


def test_text_and_path_give_the_same_model(tmp_path):
    text = chain()
    path = tmp_path / "chain.urdf"
    path.write_text(text)
    from_text, from_path = load_urdf(text), load_urdf(path)
    for name in ("link_mass", "link_inertia", "joint_parent_x", "joint_child_x"):
        np.testing.assert_array_equal(getattr(from_text, name), getattr(from_path, name))


# -- merging and frames, by hand ---------------------------------------------------------------


def test_inertial_rotated_into_the_link_frame():
    # principal moments (1, 2, 3) about the inertial frame's axes, that frame turned 90° about
    # z: the link frame's x axis is the inertial frame's y axis
    text = robot("<link name='base'/>",
                 link("a", inertia="1 0 0 2 0 3",
                      origin="<origin xyz='0.1 0.2 0.3' rpy='0 0 1.5707963267948966'/>"),
                 joint("j", "base", "a"))
    model = load_urdf(text)
    np.testing.assert_allclose(model.link_inertia[0], np.diag([2.0, 1.0, 3.0]), atol=1e-15)
    np.testing.assert_allclose(model.joint_child_x[0], [-0.1, -0.2, -0.3])


def test_fixed_joint_merge_uses_the_parallel_axis_theorem():
    # two 1 kg bodies with inertia 0.1·E, 2 m apart along x (the second hangs on a fixed
    # joint turned 90° about z, which leaves an isotropic inertia unchanged)
    text = robot("<link name='base'/>", link("a"), link("c"), joint("j", "base", "a"),
                 joint("weld", "a", "c", kind="fixed", xyz="2 0 0", rpy="0 0 1.5707963"))
    model = load_urdf(text)
    assert model.link_names == ("a",) and model.link_mass[0] == 2.0
    np.testing.assert_allclose(model.joint_child_x[0], [-1.0, 0.0, 0.0])
    np.testing.assert_allclose(model.link_inertia[0], np.diag([0.2, 2.2, 2.2]), atol=1e-15)


def test_child_joint_of_a_merged_link_is_expressed_in_the_parents_frame():
    # b hangs from c, welded to a at x = 2 and turned 90° about z; b's joint sits 1 m along
    # c's x axis, which is a's y axis
    text = robot("<link name='base'/>", link("a"), link("b"), "<link name='c'/>",
                 joint("j1", "base", "a"),
                 joint("weld", "a", "c", kind="fixed", xyz="2 0 0", rpy="0 0 1.5707963267948966"),
                 joint("j2", "c", "b", xyz="1 0 0"))
    model = load_urdf(text)
    assert model.joint_names == ("j1", "j2")
    np.testing.assert_allclose(model.joint_parent_x[1], [2.0, 1.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(model.joint_parent_q[1],
                               [np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)], atol=1e-15)


@pytest.mark.parametrize("rpy, quaternion", [
    ("3.141592653589793 0 0", [0, 1, 0, 0]), ("0 3.141592653589793 0", [0, 0, 1, 0]),
    ("0 0 3.141592653589793", [0, 0, 0, 1]), ("0.3 -0.4 0.5", None),
])
def test_joint_frame_quaternions_of_half_turns_and_general_angles(rpy, quaternion):
    text = robot("<link name='base'/>", link("a"), joint("j", "base", "a", rpy=rpy))
    q = load_urdf(text).joint_parent_q[0]
    if quaternion is None:  # roll about x, then pitch about y, then yaw about z
        roll, pitch, yaw = map(float, rpy.split())
        halves = [np.array([np.cos(a / 2), *(np.sin(a / 2) * np.eye(3)[k])])
                  for a, k in ((yaw, 2), (pitch, 1), (roll, 0))]
        quaternion = _product(_product(halves[0], halves[1]), halves[2])
    assert abs(np.dot(q, quaternion)) == pytest.approx(1.0, abs=1e-15)


def _product(p, q):
    """Hamilton product of quaternions (w, x, y, z)."""
    return np.array([p[0] * q[0] - p[1:] @ q[1:],
                     *(p[0] * q[1:] + q[0] * p[1:] + np.cross(p[1:], q[1:]))])


def test_joints_sharing_a_link_name_ignored_tags_and_massless_fixed_links():
    text = robot("<link name='base'/>", link("a"), "<link name='tip'/>",
                 joint("a", "base", "a"), joint("tip", "a", "tip", kind="fixed"),
                 "<gazebo reference='a'><gravity>0</gravity></gazebo>",
                 "<transmission name='t'><joint name='nowhere'/></transmission>",
                 "<link name='sensor'><visual><geometry><mesh filename='package://x/y.dae'/>"
                 "</geometry></visual></link>", joint("s", "a", "sensor", kind="fixed"))
    model = load_urdf(text)
    assert model.joint_names == ("a",) and model.link_names == ("a",)
    assert model.link_mass[0] == 1.0


def test_joint_kinds_axes_limits_and_dynamics():
    text = robot("<link name='base'/>", link("a"), link("b"), link("c"),
                 joint("spin", "base", "a", kind="continuous", axis="0 0 2",
                       extra="<dynamics damping='0.5' friction='0.2'/>"),
                 joint("slide", "a", "b", kind="prismatic", axis="3 4 0"),
                 joint("hinge", "b", "c"))
    model = load_urdf(text, compliance=1e-6, gravity=(0, 0, -9.8))
    np.testing.assert_array_equal(model.joint_type,
                                  [JOINT_TYPES.index(t) for t in ("revolute", "prismatic",
                                                                   "revolute")])
    np.testing.assert_allclose(model.joint_axis, [[0, 0, 1], [0.6, 0.8, 0], [0, 0, 1]])
    np.testing.assert_allclose(model.joint_lower, [-np.inf, -1, -1])
    np.testing.assert_allclose(model.joint_upper, [np.inf, 1, 1])
    np.testing.assert_allclose(model.joint_damping, [0.5, 0, 0])
    np.testing.assert_allclose(model.joint_friction, [0.2, 0, 0])
    np.testing.assert_allclose(model.joint_compliance, 1e-6)
    np.testing.assert_allclose(model.gravity, [0, 0, -9.8])


def test_frozen_prismatic_joint_translates_along_its_axis():
    text = robot("<link name='base'/>", link("a"), link("b"), joint("j1", "base", "a"),
                 joint("slide", "a", "b", kind="prismatic", axis="0 1 0", xyz="1 0 0"))
    model = load_urdf(text, joints=["j1"], initial_positions={"slide": 0.5})
    # b's COM at (1, 0.5, 0) merged with a's at the origin
    np.testing.assert_allclose(model.joint_child_x[0], [-0.5, -0.25, 0.0])


def test_joints_in_tree_order_whatever_the_document_order():
    text = robot(link("b"), joint("j2", "a", "b"), link("a"), joint("j1", "base", "a"),
                 "<link name='base'/>")
    model = load_urdf(text, initial_positions=[0.1, 0.2])
    assert model.joint_names == ("j1", "j2") and model.link_names == ("a", "b")
    np.testing.assert_array_equal(model.joint_parent, [-1, 0])
    np.testing.assert_allclose(model.joint_rest, [0.1, 0.2])


def test_bundled_double_pendulum():
    path = BAXTER.parents[1] / "double_pendulum" / "double_pendulum.urdf"
    model = load_urdf(path)
    assert model.joint_names == ("joint1", "joint2")
    np.testing.assert_allclose(model.link_mass, [1.0, 1.0])
    # link lengths (Table II's initial design): joint to COM, the next joint at the COM
    np.testing.assert_allclose(model.joint_child_x, [[-3.0, 0, 0], [-0.1, 0, 0]])
    np.testing.assert_allclose(model.joint_parent_x, 0.0)
    np.testing.assert_allclose(model.joint_lower, -np.inf)


# -- hostile and broken input ----------------------------------------------------------------

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE robot [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<robot name="&lol9;"><link name="&lol9;"/></robot>
"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE robot [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<robot name="r"><link name="&secret;"/></robot>
"""

BAD_INPUTS = [
    (BILLION_LAUGHS, r"<URDF text>:2: <!DOCTYPE> is refused"),
    (EXTERNAL_ENTITY, r":2: <!DOCTYPE> is refused"),
    ("<robot name='r'>\n<link name='a'>\n</robot>", r"<URDF text>:3: malformed XML"),
    ("<model/>", "root element is <model>"),
    ("<robot/>", "has no <link>"),
    (robot("<link/>"), "<URDF text>:1: <link>: has no name attribute"),
    (chain().replace("type='revolute'", "type='hinge'", 1), "joint 'j1': unknown joint type "
                                                            "'hinge'"),
    (chain().replace("type='revolute'", "type='floating'", 1), "floating_base=True"),
    (chain().replace("type='revolute'", "type='planar'", 1), "'planar' is not supported"),
    (chain().replace("<parent link='base'/>", "<parent link='bse'/>"),
     "parent link 'bse' is not a <link> of the robot \\(did you mean 'base'"),
    (chain().replace("<child link='b'/>", "<child link='c'/>"), "child link 'c' is not"),
    (chain().replace("<child link='b'/>", ""), r"joint 'j2': needs <child link=\.\.\.>"),
    (chain().replace("<mass value='1.0'/>", "<mass value='0'/>", 1),
     r"link 'a': mass 0.0 kg must be > 0"),
    (chain().replace("<mass value='1.0'/>", "<mass value='-2'/>", 1), "mass -2.0 kg"),
    (chain().replace("ixx='0.1'", "ixx='-0.1'", 1), "link 'a': the inertia is not positive "
                                                    "definite"),
    (chain().replace("ixx='0.1'", "ixx='0.5'", 1), "link 'a': .*triangle inequality"),
    (chain().replace("iyy='0.1'", "iyy='nan'", 1), "iyy='nan'> must be 1 finite number"),
    (chain().replace("xyz='1 0 0'", "xyz='1 0'", 1), "xyz='1 0'> must be 3 finite numbers"),
    (chain(joint("back", "b", "a")), "link 'a' already has the parent joint 'j1'"),
    (robot(link("a"), link("b"), joint("j1", "a", "b"), joint("j2", "b", "a")),
     r"the joints \['j2', 'j1'\] form a cycle"),
    (robot(link("a"), link("b"), link("c"), joint("j1", "a", "b"), joint("j2", "c", "c")),
     r"joint 'j2'.*form a cycle"),
    (robot(link("a"), link("b")), r"links \['a', 'b'\] have no parent joint"),
    (chain().replace("axis xyz='0 0 1'", "axis xyz='0 0 0'", 1), "joint 'j1': the axis is "
                                                                 "zero"),
    (chain().replace("lower='-1' upper='1'", "lower='1' upper='-1'", 1),
     "lower limit 1.0 > upper limit -1.0"),
    (chain().replace("<limit lower='-1' upper='1' effort='1' velocity='1'/>", "", 1),
     "needs <limit"),
    (chain().replace("</joint>", "<dynamics damping='-1'/></joint>", 1),
     "damping -1.0 and friction 0.0 must be >= 0"),
    (chain("<joint name='j1' type='fixed'><parent link='a'/><child link='x'/></joint>",
           "<link name='x'/>"), "a second joint of this name"),
    (chain(link("a")), "a second link of this name"),
    (robot("<link name='base'/>", link("a"), link("b"), joint("j1", "base", "a"),
           joint("j2", "a", "b", extra="<mimic joint='j1'/>")),
     "joint 'j2': <mimic> joints are not supported"),
    (robot("<link name='base'/>", "<link name='a'/>", joint("j", "base", "a")),
     "link 'a': moves but has no mass"),
]


@pytest.mark.parametrize("text, message", BAD_INPUTS)
def test_bad_urdf_raises_naming_the_element(text, message):
    with pytest.raises(URDFError, match=message):
        load_urdf(text)


@pytest.mark.parametrize("options, message", [
    ({"joints": ["j3"]}, "'j3' is not a joint of the robot"),
    ({"joints": []}, "joints is empty"),
    ({"joints": ["j1", "j1"]}, "'j1' is named twice"),
    ({"base_link": "nowhere"}, "base_link 'nowhere' is not a link"),
    ({"initial_positions": {"j9": 0.1}}, "'j9' is not a movable joint"),
    ({"initial_positions": [0.1]}, "has 1 values; give one per kept joint"),
    ({"initial_positions": {"j1": float("nan")}}, "'j1' is nan; give a finite number"),
])
def test_bad_loader_options_raise(options, message):
    with pytest.raises(URDFError, match=message):
        load_urdf(chain(), **options)


def test_joint_subset_must_be_a_chain():
    with pytest.raises(URDFError, match="'right_s0' and 'left_s0' both hang from link "
                                        "'base'"):
        load_urdf(BAXTER, joints=["right_s0", "left_s0"])
    with pytest.raises(URDFError, match="'left_hand' is a fixed joint"):
        load_urdf(BAXTER, joints=["left_s0", "left_hand"])
    assert load_urdf(BAXTER, joints=["left_w1", "left_s0"]).joint_names == ("left_s0",
                                                                            "left_w1")


def test_missing_file_is_named(tmp_path):
    with pytest.raises(URDFError, match="no URDF file at .*missing.urdf"):
        load_urdf(tmp_path / "missing.urdf")
