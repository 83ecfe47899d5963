"""Issue 33 #4: what an operator may give, the pure checks the command line, the web page and the queue share
(``inputs``, ``jenkins.jobs``): whole numbers within their column's range, names without control characters, a
controller that is configured."""

from __future__ import annotations

import pytest

from jenkins_dispatch import inputs
from jenkins_dispatch.errors import InvalidInput
from jenkins_dispatch.jenkins.jobs import job_name_error, job_path_error
from jenkins_dispatch.ui import forms

INT_HIGHEST, BIGINT_HIGHEST = 2**31 - 1, 2**63 - 1


@pytest.mark.parametrize(("text", "allowed", "expected"), [
    ("0", inputs.CAP, 0),
    (" 7 ", inputs.CAP, 7),
    (str(INT_HIGHEST), inputs.CAP, INT_HIGHEST),
    ("-2147483648", inputs.PRIORITY, -(2**31)),
    ("+5", inputs.PRIORITY, 5),
    (str(BIGINT_HIGHEST), inputs.ID, BIGINT_HIGHEST),
    ("65535", inputs.PORT, 65535),
])
def test_a_whole_number_in_its_range_is_read(text, allowed, expected):
    assert inputs.whole_number(text, allowed) == expected


@pytest.mark.parametrize(("text", "allowed", "message"), [
    (str(INT_HIGHEST + 1), inputs.CAP, "expected a whole number from 0 to 2147483647, got '2147483648'"),
    ("99999999999", inputs.PRIORITY, "from -2147483648 to 2147483647, got '99999999999'"),
    ("-2147483649", inputs.PRIORITY, "from -2147483648 to 2147483647"),
    ("-1", inputs.CAP, "from 0 to 2147483647, got '-1'"),
    ("0", inputs.RATE, "from 1 to 2147483647, got '0'"),
    ("0", inputs.ATTEMPTS, "from 1 to 2147483647, got '0'"),
    (str(BIGINT_HIGHEST + 1), inputs.ID, "from 1 to 9223372036854775807"),
    ("0", inputs.ID, "from 1 to 9223372036854775807"),
    ("99999999999999999999", inputs.HOW_MANY, "from 1 to 9223372036854775807"),
    ("70000", inputs.PORT, "from 0 to 65535"),
    ("9" * 5000, inputs.ID, "from 1 to 9223372036854775807"),  # more digits than Python converts
    ("1.5", inputs.CAP, "expected a whole number"),
    ("1e3", inputs.CAP, "expected a whole number"),
    ("5_000", inputs.CAP, "expected a whole number"),
    ("\u00b2", inputs.CAP, "expected a whole number"),  # a digit to str.isdigit, not to int()
    ("\u0665", inputs.CAP, "expected a whole number"),  # an Arabic-Indic five
    ("", inputs.CAP, "expected a whole number"),
    ("many", inputs.CAP, "expected a whole number"),
])
def test_anything_else_is_refused_in_one_line_saying_the_range(text, allowed, message):
    with pytest.raises(InvalidInput) as refused:
        inputs.whole_number(text, allowed)
    assert message in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(("value", "allowed", "refused"), [
    (5, inputs.PRIORITY, False), (2**31, inputs.PRIORITY, True), (-(2**31) - 1, inputs.PRIORITY, True),
    (0, inputs.CAP, False), (-1, inputs.CAP, True), (0, inputs.RATE, True), (30.0, inputs.AGE_DAYS, False),
    (36_500, inputs.AGE_DAYS, False), (36_501, inputs.AGE_DAYS, True), (float("inf"), inputs.AGE_DAYS, True),
    (float("nan"), inputs.AGE_DAYS, True), (-0.5, inputs.AGE_DAYS, True),
])
def test_a_value_given_as_a_number_is_held_to_the_same_range(value, allowed, refused):
    assert (allowed.error(value) is not None) == refused


@pytest.mark.parametrize(("text", "found"), [
    ("deploy", None), ("team/app deploy", None), ("déploiement/ü", None), ("feature%2Ffoo", None),
    ("de\tploy", "U+0009"), ("a\nb", "U+000A"), ("\x00", "U+0000"), ("x\x1b[31m", "U+001B"), ("\x7f", "U+007F"),
    ("de\x85ploy", "U+0085"), ("\x9f", "U+009F"), ("\xa0", None),
])
def test_control_characters_are_those_java_calls_iso_control(text, found):
    assert inputs.control_character(text) == found


@pytest.mark.parametrize(("name", "message"), [
    ("deploy", None),
    ("team/app/deploy", None),
    ("feature%2Ffoo", None),  # a multibranch job's encoded branch: Jenkins makes such names itself
    ("de\tploy", "invalid Jenkins job name 'de\\tploy': it holds a control character (U+0009)"),
    ("team/de\x85ploy", "control character (U+0085)"),
    ("a//b", "folders are separated by single '/'"),
    ("a/../b", "Jenkins forbids '.' and '..'"),
])
def test_a_job_path_refuses_control_characters_as_jenkins_does(name, message):
    error = job_path_error(name)
    assert (error is None) if message is None else (message in error)


@pytest.mark.parametrize(("name", "message"), [
    ("deploy", None),
    ("j" * 1024, None),
    ("  ", "job name must not be empty"),
    ("", "job name must not be empty"),
    ("j" * 1025, "at most 1024 characters"),
    ("de\tploy", "control character (U+0009)"),
    ("/deploy", "folders are separated by single '/'"),
])
def test_a_job_name_the_queue_takes(name, message):
    error = job_name_error(name)
    assert (error is None) if message is None else (message in error)


@pytest.mark.parametrize(("name", "message"), [
    ("ENV", None), ("with space", None), ("ü", None),
    ("", "a parameter name must not be empty"),
    ("A\tB", "parameter name 'A\\tB' holds a control character (U+0009)"),
    ("A\u2028", None),  # a line separator is no ISO control character: Jenkins takes it
])
def test_parameter_names(name, message):
    error = inputs.parameter_name_error(name)
    assert (error is None) if message is None else (message in error)


@pytest.mark.parametrize(("key", "message"), [
    ("release-1.4.3", None), ("", None), ("k" * 255, None),
    ("a\nb", "dedupe key 'a\\nb' holds a control character (U+000A)"),
    ("k" * 256, "a dedupe key holds at most 255 characters, got 256"),
])
def test_dedupe_keys(key, message):
    error = inputs.dedupe_key_error(key)
    assert (error is None) if message is None else (message in error)


@pytest.mark.parametrize(("name", "configured", "message"), [
    ("default", ("default", "eu"), None),
    ("eu", ("default", "eu"), None),
    ("nope", ("default", "eu"), "controller 'nope' is not configured (configured: default, eu)"),
    ("zz", ("eu", "default"), "(configured: default, eu)"),
    ("default", (), "controller 'default' is not configured (none is: set JENKINS_URL or JENKINS_CONTROLLERS)"),
    ("Not a name!", ("default",), "bad controller name 'Not a name!'"),
    ("x" * 65, ("default",), "bad controller name"),
])
def test_a_controller_something_is_stored_for_must_be_configured(name, configured, message):
    error = inputs.controller_error(name, configured)
    assert (error is None) if message is None else (message in error)
    if message and "bad controller name" in message:
        assert inputs.controller_name_error(name) == error  # the name's rule alone: enqueue's
    elif message is None:
        assert inputs.controller_name_error(name) is None


@pytest.mark.parametrize(("text", "expected"), [("3", 3), (" 0 ", 0), ("", None), (None, None),
                                                (str(INT_HIGHEST), INT_HIGHEST)])
def test_the_pages_cap_is_read_by_the_same_rule(text, expected):
    assert forms.cap(text) == expected


@pytest.mark.parametrize(("read", "text", "message"), [
    (forms.cap, "2147483648", "cap: expected a whole number from 0 to 2147483647"),
    (forms.cap, "\u00b2", "cap: expected a whole number from 0 to 2147483647"),
    (forms.rate, "2147483648", "per_minute: expected a whole number from 1 to 2147483647"),
    (forms.rate, "\u00b2", "per_minute: expected a whole number from 1 to 2147483647"),
    (lambda text: forms.positive_id(text, "before"), "\u00b2", "before: expected a job id"),
    (lambda text: forms.job_name(text), "de\tploy", "job: invalid Jenkins job name 'de\\tploy'"),
])
def test_the_pages_fields_are_refused_naming_the_field(read, text, message):
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace("\\", "\\\\")):
        read(text)
