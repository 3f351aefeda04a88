"""The suite's own scheduling (issue 73): tests/conftest.py hands out test files slowest first, by the file times
`python -m scripts.suite_timing` reads from pytest's JUnit XML into docs/results/suite.json."""

import json
from types import SimpleNamespace

import conftest

from scripts.suite_timing import file_seconds


def test_files_go_slowest_first_and_keep_their_tests_order(tmp_path, monkeypatch):
    times = tmp_path / "suite.json"
    times.write_text(json.dumps({"file_seconds": {"tests/test_b.py": 90.0, "tests/test_c.py": 5.0}}))
    monkeypatch.setattr(conftest, "SUITE_TIMES", times)
    ids = ["tests/test_a.py::one", "tests/test_c.py::one", "tests/test_b.py::one", "tests/test_a.py::two",
           "tests/test_b.py::two"]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == ["tests/test_b.py::one", "tests/test_b.py::two", "tests/test_c.py::one",
                                         "tests/test_a.py::one", "tests/test_a.py::two"]   # unlisted: after, in order
    # The slowest file that needs none of the shared builds goes second: the second worker runs it meanwhile.
    times.write_text(json.dumps({"file_seconds": {"tests/test_b.py": 90.0, "tests/test_c.py": 50.0,
                                                  "tests/test_d.py": 20.0, "tests/test_e.py": 10.0}}))
    uses = {"b": ["tiny_run"], "c": ["tmp_path", "tiny_bundle"], "d": ["tiny_companion"], "e": ["tmp_path"]}
    ids = ["tests/test_e.py::one", "tests/test_d.py::one", "tests/test_c.py::one", "tests/test_b.py::one",
           "tests/test_e.py::two"]
    items = [SimpleNamespace(nodeid=i, fixturenames=uses[i[11]]) for i in ids]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == ["tests/test_b.py::one", "tests/test_e.py::one", "tests/test_e.py::two",
                                         "tests/test_c.py::one", "tests/test_d.py::one"]
    items = [SimpleNamespace(nodeid=i, fixturenames=["tiny_run"]) for i in ids]   # every file needs one
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items][:2] == ["tests/test_b.py::one", "tests/test_c.py::one"]
    times.write_text("{not json")
    unsorted = [SimpleNamespace(nodeid=i) for i in ids]
    conftest.pytest_collection_modifyitems(None, unsorted)   # an unreadable file: no error, the order as collected
    assert [i.nodeid for i in unsorted] == ids


def test_file_seconds_adds_up_each_files_tests_from_junit_xml(tmp_path):
    xml = tmp_path / "suite.xml"
    xml.write_text('<testsuites><testsuite name="pytest">'
                   '<testcase classname="tests.test_a" name="one" time="1.25"/>'
                   '<testcase classname="tests.test_a.TestGroup" name="two" time="2.0"/>'
                   '<testcase classname="tests.test_b" name="three[x]" time="7.5"/>'
                   '</testsuite></testsuites>')
    assert file_seconds(xml) == {"tests/test_b.py": 7.5, "tests/test_a.py": 3.2}
