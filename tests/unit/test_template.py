"""template.yaml: the resources, least-privilege policies, parameters, alarms, dashboard and outputs.

The YAML is parsed with a SafeLoader that understands the CloudFormation short tags; when the SAM
translator is installed the template is also expanded (offline) to check the generated IAM roles.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"

QUEUE_METRICS = [
    "Claimed", "Triggered", "TriggerErrors", "AdoptedAfterCrash", "LeasesExpired", "PassDurationMs",
    "OldestPendingAgeSeconds", "InFlight", "JobsFailed", "JobsCompleted", "PassesCompleted", "JenkinsUnavailable",
    "OldestTransactionAgeSeconds", "Pending", "PausedJobs", "EverythingPaused",
]
WEBHOOK_METRICS = [
    "NotificationsAccepted", "NotificationsDuplicate", "NotificationsStale", "NotificationsUnknown",
    "NotificationsRejectedAuth", "NotificationsMalformed",
]
SECRET_PARAMETERS = {"DbSecretArn", "JenkinsSecretArn", "WebhookSecretArn"}


class CfnLoader(yaml.SafeLoader):
    pass


def _tag(tag: str):
    name = "Ref" if tag == "Ref" else f"Fn::{tag}"

    def construct(loader, node):
        if isinstance(node, yaml.ScalarNode):
            value = loader.construct_scalar(node)
            if tag == "GetAtt":
                value = value.split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        return {name: value}

    return construct


for _t in ("Ref", "Sub", "GetAtt", "If", "Equals", "Not", "And", "Or", "Join", "Select", "Split",
           "FindInMap", "ImportValue", "Base64", "Cidr", "GetAZs", "Condition"):
    CfnLoader.add_constructor(f"!{_t}", _tag(_t))


@pytest.fixture(scope="module")
def template() -> dict:
    return yaml.load(TEMPLATE.read_text(), Loader=CfnLoader)  # noqa: S506 - SafeLoader subclass


@pytest.fixture(scope="module")
def resources(template) -> dict:
    return template["Resources"]


def _walk(value):
    yield value
    if isinstance(value, dict):
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)


def _statements(function: dict) -> list:
    out = []
    for policy in function["Properties"]["Policies"]:
        assert isinstance(policy, dict) and "Statement" in policy, "inline policy documents only"
        out.extend(policy["Statement"])
    return out


def _unwrap(statement):
    """A statement, or (condition, statement) when wrapped in !If [cond, statement, NoValue]."""
    if isinstance(statement, dict) and "Fn::If" in statement:
        cond, then, other = statement["Fn::If"]
        assert other == {"Ref": "AWS::NoValue"}
        return cond, then
    return None, statement


# --------------------------------------------------------------------------- structure


def test_serverless_transform_and_runtime(template):
    assert template["Transform"] == "AWS::Serverless-2016-10-31"
    fn = template["Globals"]["Function"]
    assert fn["Runtime"] == "python3.12"
    assert fn["Architectures"] == ["x86_64"]
    assert fn["Layers"] == [{"Ref": "SharedLayer"}]
    assert fn["VpcConfig"] == {"SubnetIds": {"Ref": "SubnetIds"}, "SecurityGroupIds": {"Ref": "SecurityGroupIds"}}
    env = fn["Environment"]["Variables"]
    assert env["POWERTOOLS_SERVICE_NAME"] == "jenkins-dispatch"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "JenkinsDispatch"
    assert env["DB_HOST"] == {"Ref": "DbHost"} and env["DB_IAM_AUTH"] == {"Ref": "DbIamAuth"}
    assert env["DB_SECRET_ARN"] == {"Fn::If": ["HasDbSecret", {"Ref": "DbSecretArn"}, {"Ref": "AWS::NoValue"}]}


def test_no_secret_values_in_environment(resources, template):
    envs = [template["Globals"]["Function"]["Environment"]["Variables"]]
    envs += [r["Properties"].get("Environment", {}).get("Variables", {}) for r in resources.values()
             if r["Type"] == "AWS::Serverless::Function"]
    names = {k for env in envs for k in env}
    assert not names & {"DATABASE_URL", "JENKINS_API_TOKEN", "WEBHOOK_SECRET", "DB_PASSWORD"}
    assert {"DB_SECRET_ARN", "JENKINS_SECRET_ARN", "WEBHOOK_SECRET_ARN"} <= names


def test_shared_layer_is_built_by_makefile(resources):
    layer = resources["SharedLayer"]
    assert layer["Type"] == "AWS::Serverless::LayerVersion"
    assert layer["Properties"]["ContentUri"] == "layers/shared"
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.12"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["x86_64"]
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    makefile = (ROOT / "layers/shared/Makefile").read_text()
    assert "build-SharedLayer:" in makefile and "manylinux2014_x86_64" in makefile
    assert "--invalidation-mode unchecked-hash" in makefile
    assert "truststore.pki.rds.amazonaws.com/global/global-bundle.pem" in makefile
    requirements = (ROOT / "layers/shared/requirements.txt").read_text()
    for package in ("pg8000", "pymysql", "aws-lambda-powertools[tracer]", "requests"):
        assert package in requirements
    assert "boto3" not in requirements.replace("boto3/botocore", "")


def test_dispatcher_function(resources):
    fn = resources["DispatcherFunction"]
    props = fn["Properties"]
    assert fn["Type"] == "AWS::Serverless::Function"
    assert props["CodeUri"] == "functions/dispatcher" and props["Handler"] == "app.lambda_handler"
    assert props["Timeout"] == {"Ref": "DispatcherTimeoutSeconds"}
    assert props["ReservedConcurrentExecutions"] == {
        "Fn::If": ["HasReserved", {"Ref": "ReservedConcurrency"}, {"Ref": "AWS::NoValue"}]
    }
    schedule = props["Events"]["Schedule"]
    assert schedule["Type"] in ("ScheduleV2", "Schedule")
    assert schedule["Properties"]["ScheduleExpression"] == {"Ref": "ScheduleExpression"}
    json.loads(schedule["Properties"]["Input"])  # the Scheduler's payload is valid JSON
    invoke = props["EventInvokeConfig"]
    assert invoke["MaximumRetryAttempts"] == 0
    assert invoke["DestinationConfig"]["OnFailure"] == {
        "Type": "SQS", "Destination": {"Fn::GetAtt": ["DispatcherDeadLetterQueue", "Arn"]}
    }
    assert resources["DispatcherDeadLetterQueue"]["Type"] == "AWS::SQS::Queue"
    env = props["Environment"]["Variables"]
    assert env["JENKINS_SECRET_ARN"] == {"Ref": "JenkinsSecretArn"}
    assert env["BATCH_SIZE"] == {"Ref": "BatchSize"}
    assert env["MAX_PARALLEL_TRIGGERS"] == {"Ref": "MaxParallelTriggers"}
    assert env["MAX_IN_FLIGHT"] == {"Fn::If": ["HasMaxInFlight", {"Ref": "MaxInFlight"}, {"Ref": "AWS::NoValue"}]}


def test_continuous_dispatch_by_default_with_invocations_that_overlap(template, resources):
    """Continuous mode: each invocation dispatches until timeout - margin - Jenkins timeout, which must
    reach past the next scheduled start (60 s), so there is never a gap without a listening dispatcher."""
    params = template["Parameters"]
    assert params["ScheduleExpression"]["Default"] == "rate(1 minute)"
    assert params["ContinuousDispatch"]["Default"] == "true"
    env = resources["DispatcherFunction"]["Properties"]["Environment"]["Variables"]
    assert env["DISPATCHER_MODE"] == {"Fn::If": ["IsContinuous", "continuous", "single"]}
    timeout = int(params["DispatcherTimeoutSeconds"]["Default"])
    margin = 10  # TIME_MARGIN_SECONDS default (config.py)
    listening = timeout - margin - int(params["JenkinsTimeoutSeconds"]["Default"])
    assert listening > 60, "consecutive invocations would leave a gap"
    assert timeout <= 900


def test_webhook_behind_http_api_with_throttling(resources):
    props = resources["WebhookFunction"]["Properties"]
    event = props["Events"]["Notify"]
    assert event["Type"] == "HttpApi"
    assert event["Properties"]["Method"] == "POST" and event["Properties"]["Path"] == "/jenkins/notify"
    assert event["Properties"]["PayloadFormatVersion"] == "2.0"
    assert event["Properties"]["ApiId"] == {"Ref": "WebhookApi"}
    api = resources["WebhookApi"]
    assert api["Type"] == "AWS::Serverless::HttpApi"
    route = api["Properties"]["DefaultRouteSettings"]
    assert route["ThrottlingRateLimit"] == {"Ref": "WebhookThrottleRate"}
    assert route["ThrottlingBurstLimit"] == {"Ref": "WebhookThrottleBurst"}
    assert props["Environment"]["Variables"]["WEBHOOK_SECRET_ARN"] == {"Ref": "WebhookSecretArn"}


def test_optional_function_url_authenticated_by_the_function(resources, template):
    url = resources["WebhookFunctionUrl"]
    assert url["Type"] == "AWS::Lambda::Url" and url["Condition"] == "CreateFunctionUrl"
    assert url["Properties"]["AuthType"] == "NONE"
    perms = [r for r in resources.values() if r["Type"] == "AWS::Lambda::Permission"]
    assert {p["Properties"]["Action"] for p in perms} == {"lambda:InvokeFunctionUrl", "lambda:InvokeFunction"}
    assert all(p["Condition"] == "CreateFunctionUrl" for p in perms)
    invoke = next(p for p in perms if p["Properties"]["Action"] == "lambda:InvokeFunction")
    assert invoke["Properties"]["InvokedViaFunctionUrl"] is True  # not a public direct invoke
    assert template["Conditions"]["CreateFunctionUrl"] == {"Fn::Equals": [{"Ref": "EnableFunctionUrl"}, "true"]}


def test_migrations_custom_resource(resources):
    fn = resources["MigrateFunction"]["Properties"]
    assert fn["CodeUri"] == "functions/migrate" and fn["Handler"] == "app.lambda_handler"
    custom = resources["Migrations"]
    assert custom["Type"] == "Custom::Migrations"
    props = custom["Properties"]
    assert props["ServiceToken"] == {"Fn::GetAtt": ["MigrateFunction", "Arn"]}
    assert props["SchemaVersion"] == {"Ref": "SharedLayer"}  # new layer version -> Update -> migrate
    assert int(props["ServiceTimeout"]) <= 900
    assert (ROOT / "functions/migrate/app.py").exists()


# --------------------------------------------------------------------------- IAM


@pytest.mark.parametrize(
    "function, secrets",
    [
        ("DispatcherFunction", {"JenkinsSecretArn", "DbSecretArn"}),
        ("WebhookFunction", {"WebhookSecretArn", "DbSecretArn"}),
        ("MigrateFunction", {"DbSecretArn"}),
    ],
)
def test_least_privilege_policies(resources, function, secrets):
    statements = _statements(resources[function])
    named: set[str] = set()
    rds_connect = []
    for raw in statements:
        condition, st = _unwrap(raw)
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        assert st["Effect"] == "Allow"
        assert all("*" not in a for a in actions), actions
        resources_ = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
        if "secretsmanager:GetSecretValue" in actions:
            assert actions == ["secretsmanager:GetSecretValue"]
            for r in resources_:
                cond, ref = _unwrap(r)
                assert set(ref) == {"Ref"} and ref["Ref"] in SECRET_PARAMETERS, r
                if ref["Ref"] == "DbSecretArn":
                    assert cond == "HasDbSecret" or condition == "HasDbSecret"
                named.add(ref["Ref"])
        elif actions == ["rds-db:connect"]:
            rds_connect.append((condition, resources_))
        else:
            assert actions == ["kms:Decrypt"] and condition == "HasKmsKey"
    assert named == secrets
    assert len(rds_connect) == 1
    condition, res = rds_connect[0]
    assert condition == "UseIamAuth"
    assert res == [{"Fn::Sub": "arn:${AWS::Partition}:rds-db:${AWS::Region}:${AWS::AccountId}:dbuser:${DbResourceId}/${DbUser}"}]
    for value in _walk(resources[function]["Properties"]["Policies"]):
        assert value != "*"


def test_expanded_roles_have_no_broad_secret_access(template):
    """Expand the SAM transform offline and look at the IAM roles CloudFormation would create."""
    samtranslator = pytest.importorskip("samtranslator.translator.transform")
    from cfnlint.decode import decode

    decoded, matches = decode(str(TEMPLATE))
    assert not matches
    doc = json.loads(json.dumps(decoded, default=str))
    for res in doc["Resources"].values():
        props = res.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if key in props:
                props[key] = "s3://bucket/artifact.zip"

    class Policies:
        def load(self):
            return {}

    old = os.environ.get("AWS_DEFAULT_REGION")
    os.environ["AWS_DEFAULT_REGION"] = old or "us-east-1"
    try:
        out = samtranslator.transform(doc, {}, Policies())
    finally:
        if old is None:
            os.environ.pop("AWS_DEFAULT_REGION", None)
    roles = {k: v for k, v in out["Resources"].items() if v["Type"] == "AWS::IAM::Role"}
    assert {"DispatcherFunctionRole", "WebhookFunctionRole", "MigrateFunctionRole"} <= set(roles)
    for name, role in roles.items():
        text = json.dumps(role["Properties"].get("Policies", []))
        assert '"secretsmanager:*"' not in text and '"rds-db:*"' not in text, name
        for value in _walk(role["Properties"].get("Policies", [])):
            if isinstance(value, dict) and value.get("Action") == "secretsmanager:GetSecretValue":
                assert value["Resource"] != "*", name
    # The on-failure destination got its SQS permission from SAM.
    dispatcher = json.dumps(roles["DispatcherFunctionRole"]["Properties"]["Policies"])
    assert "sqs:SendMessage" in dispatcher


# --------------------------------------------------------------------------- parameters and rules


def test_parameters(template):
    params = template["Parameters"]
    expected = {
        "SubnetIds", "SecurityGroupIds", "DbHost", "DbPort", "DbName", "DbSecretArn", "DbIamAuth", "DbUser",
        "DbResourceId", "JenkinsSecretArn", "WebhookSecretArn", "ScheduleExpression", "ReservedConcurrency",
        "BatchSize", "MaxParallelTriggers", "MaxInFlight", "LeaseSeconds", "JenkinsTimeoutSeconds",
        "LogRetentionDays", "EnableFunctionUrl",
    }
    assert expected <= set(params)
    assert params["SubnetIds"]["Type"] == "List<AWS::EC2::Subnet::Id>"
    assert params["SecurityGroupIds"]["Type"] == "List<AWS::EC2::SecurityGroup::Id>"
    assert int(params["ReservedConcurrency"]["Default"]) == 0
    assert int(params["MaxInFlight"]["Default"]) == 0
    assert int(params["LeaseSeconds"]["Default"]) > int(params["JenkinsTimeoutSeconds"]["Default"])
    for name in params:
        assert params[name].get("Description"), f"{name} has no Description"


def test_conditions_and_rules(template):
    cond = template["Conditions"]
    assert cond["HasReserved"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "ReservedConcurrency"}, 0]}]}
    assert cond["UseIamAuth"] == {"Fn::Equals": [{"Ref": "DbIamAuth"}, "true"]}
    assert "HasDbSecret" in cond and "HasMaxInFlight" in cond
    rules = template["Rules"]
    assert {"DatabaseAuthentication", "IamAuthentication"} <= set(rules)


def test_database_engine_parameter_chooses_the_driver_and_the_default_port(template):
    """DatabaseEngine (postgresql | mysql) reaches every function as DB_ENGINE; an empty DbPort means the engine's
    own port (5432 or 3306), and a DbPort given wins for either engine."""
    params = template["Parameters"]
    engine = params["DatabaseEngine"]
    assert engine["Type"] == "String" and engine["AllowedValues"] == ["postgresql", "mysql"]
    assert engine["Default"] == "postgresql"  # existing PostgreSQL stacks update unchanged
    port = params["DbPort"]
    assert port["Type"] == "String" and port["Default"] == ""
    import re

    pattern = re.compile(port["AllowedPattern"])
    assert all(pattern.fullmatch(v) for v in ("", "5432", "3306", "65535"))
    assert not any(pattern.fullmatch(v) for v in ("0", "x", "-1", "123456", "5432 "))
    defaults = template["Mappings"]["DatabaseEngines"]
    assert {name: row["DefaultPort"] for name, row in defaults.items()} == {"postgresql": "5432", "mysql": "3306"}
    assert set(defaults) == set(engine["AllowedValues"])  # every engine has its default port
    assert template["Conditions"]["HasDbPort"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "DbPort"}, ""]}]}
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    assert env["DB_ENGINE"] == {"Ref": "DatabaseEngine"}
    assert env["DB_PORT"] == {"Fn::If": ["HasDbPort", {"Ref": "DbPort"},
                                         {"Fn::FindInMap": ["DatabaseEngines", {"Ref": "DatabaseEngine"}, "DefaultPort"]}]}
    grouped = {p for group in template["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
               for p in group["Parameters"]}
    assert {"DatabaseEngine", "DbPort"} <= grouped


def test_database_engine_settings_as_the_functions_would_load_them(template):
    """Resolve the template's DB_ENGINE / DB_PORT for each engine and port choice, then load them with the
    package's own config (as a function does): the right engine and port come out."""
    from jenkins_dispatch.config import load_database_settings

    env = template["Globals"]["Function"]["Environment"]["Variables"]
    mappings = template["Mappings"]

    def resolve(value, parameters):
        if isinstance(value, dict) and "Ref" in value:
            return parameters[value["Ref"]]
        if isinstance(value, dict) and "Fn::FindInMap" in value:
            table, key, field = (resolve(v, parameters) for v in value["Fn::FindInMap"])
            return mappings[table][key][field]
        if isinstance(value, dict) and "Fn::If" in value:
            condition, then, other = value["Fn::If"]
            assert condition == "HasDbPort"
            return resolve(then if parameters["DbPort"] != "" else other, parameters)
        return value

    cases = [("postgresql", "", "postgresql", 5432), ("mysql", "", "mysql", 3306),
             ("mysql", "6033", "mysql", 6033), ("postgresql", "6432", "postgresql", 6432)]
    for engine, port, expected_engine, expected_port in cases:
        parameters = {"DatabaseEngine": engine, "DbPort": port}
        variables = {"DB_ENGINE": resolve(env["DB_ENGINE"], parameters), "DB_PORT": resolve(env["DB_PORT"], parameters),
                     "DB_IAM_AUTH": "true", "DB_HOST": "db.example.com", "DB_USER": "dispatch", "DB_NAME": "jobs",
                     "AWS_REGION": "eu-west-1"}
        db = load_database_settings(variables)
        assert (db.engine, db.port, db.iam_auth, db.tls) == (expected_engine, expected_port, True, "verify"), parameters
    # With an RDS-style secret (Aurora MySQL names itself "aurora-mysql") and a password instead of IAM.
    secret = {"engine": "aurora-mysql", "host": "c.cluster-x.eu-west-1.rds.amazonaws.com", "port": 3306,
              "username": "dispatch", "password": "pw", "dbname": "jobs"}
    parameters = {"DatabaseEngine": "mysql", "DbPort": ""}
    variables = {"DB_ENGINE": resolve(env["DB_ENGINE"], parameters), "DB_PORT": resolve(env["DB_PORT"], parameters),
                 "DB_IAM_AUTH": "false", "DB_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db"}
    db = load_database_settings(variables, lambda arn: json.dumps(secret))
    assert (db.engine, db.port, db.host, db.dbname, db.tls) == ("mysql", 3306, secret["host"], "jobs", "verify")


def test_mysql_without_a_secret_needs_a_database_name(template):
    """MySQL has no default database (PostgreSQL falls back to postgres): with IAM auth and no secret to name
    one, DbName is required before anything is created."""
    rule = template["Rules"]["MysqlDatabaseName"]
    assert rule["RuleCondition"] == {"Fn::And": [{"Fn::Equals": [{"Ref": "DatabaseEngine"}, "mysql"]},
                                                 {"Fn::Equals": [{"Ref": "DbSecretArn"}, ""]}]}
    assert rule["Assertions"][0]["Assert"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "DbName"}, ""]}]}


def test_migrations_rerun_when_the_database_changes_engine_or_port(resources):
    """The custom resource's Database property names engine, host, effective port and name: pointing the stack at
    another database (a MySQL one, or another port) sends Update, which applies that engine's migrations."""
    database = resources["Migrations"]["Properties"]["Database"]
    text, variables = database["Fn::Sub"]
    assert text == "${DatabaseEngine}://${DbHost}:${Port}/${DbName}"
    assert variables == {"Port": {"Fn::If": ["HasDbPort", {"Ref": "DbPort"},
                                             {"Fn::FindInMap": ["DatabaseEngines", {"Ref": "DatabaseEngine"}, "DefaultPort"]}]}}


# --------------------------------------------------------------------------- alarms and dashboard


def _alarm_metrics(alarm: dict) -> set[tuple[str, str]]:
    props = alarm["Properties"]
    if "MetricName" in props:
        return {(props["Namespace"], props["MetricName"])}
    return {(m["MetricStat"]["Metric"]["Namespace"], m["MetricStat"]["Metric"]["MetricName"])
            for m in props["Metrics"] if "MetricStat" in m}


def test_alarms(resources):
    alarms = {k: v for k, v in resources.items() if v["Type"] == "AWS::CloudWatch::Alarm"}
    watched = set().union(*(_alarm_metrics(a) for a in alarms.values()))
    assert {("AWS/Lambda", "Errors"), ("JenkinsDispatch", "OldestPendingAgeSeconds"),
            ("JenkinsDispatch", "JobsFailed"), ("JenkinsDispatch", "LeasesExpired"),
            ("AWS/ApiGateway", "4xx"), ("AWS/ApiGateway", "5xx"), ("AWS/ApiGateway", "Count")} <= watched
    for name, alarm in alarms.items():
        props = alarm["Properties"]
        if props.get("Namespace") == "JenkinsDispatch":
            assert props["Dimensions"] == [{"Name": "service", "Value": "jenkins-dispatch"}], name
        assert "TreatMissingData" in props, name
    for name in ("Webhook4xxRateAlarm", "Webhook5xxRateAlarm"):
        exprs = [m["Expression"] for m in alarms[name]["Properties"]["Metrics"] if "Expression" in m]
        assert exprs and "/ requests" in exprs[0], name


def test_alarms_that_page_when_jenkins_rejects_us_no_pass_completes_or_a_transaction_stays_open(resources, template):
    """Jenkins rejecting the credentials used to page no one until the 15-minute oldest-pending alarm; a
    dispatcher that stopped passing, or a transaction held open for hours, paged no one at all."""
    alarms = {k: v["Properties"] for k, v in resources.items() if v["Type"] == "AWS::CloudWatch::Alarm"}
    topic = {"Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]}
    expected = {
        # name: (metric, statistic, period, threshold, comparison, missing data)
        "JenkinsUnavailableAlarm": ("JenkinsUnavailable", "Sum", 300, 1, "GreaterThanOrEqualToThreshold",
                                    "notBreaching"),
        "NoDispatcherPassAlarm": ("PassesCompleted", "Sum", 60, 1, "LessThanThreshold", "breaching"),
        "OldestTransactionAgeAlarm": ("OldestTransactionAgeSeconds", "Maximum", 300,
                                      {"Ref": "OldestTransactionAlarmSeconds"}, "GreaterThanThreshold",
                                      "notBreaching"),
    }
    for name, (metric, stat, period, threshold, comparison, missing) in expected.items():
        props = alarms[name]
        assert (props["Namespace"], props["MetricName"], props["Statistic"], props["Period"], props["Threshold"],
                props["ComparisonOperator"], props["TreatMissingData"]) == (
            "JenkinsDispatch", metric, stat, period, threshold, comparison, missing), name
        assert props["AlarmActions"] == topic and props["OKActions"] == topic, name
    # N minutes without a pass: N one-minute periods, every one of them empty.
    no_pass = alarms["NoDispatcherPassAlarm"]
    assert no_pass["EvaluationPeriods"] == no_pass["DatapointsToAlarm"] == {"Ref": "NoDispatcherPassAlarmMinutes"}
    params = template["Parameters"]
    assert int(params["NoDispatcherPassAlarmMinutes"]["Default"]) == 5
    assert int(params["OldestTransactionAlarmSeconds"]["Default"]) == 300
    body = resources["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"][0]
    for name in expected:
        assert f"${{{name}.Arn}}" in body, f"{name} is not on the dashboard's alarm widget"


def test_dashboard_shows_every_queue_metric(resources):
    body_template, variables = resources["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    assert "DeadLetterQueueName" in variables
    # Render the ${...} placeholders with dummies, then the body must be JSON.
    import re

    rendered = re.sub(r"\$\{[^}]+\}", "0", body_template)
    body = json.loads(rendered)
    names = set()
    for widget in body["widgets"]:
        for metric in widget.get("properties", {}).get("metrics", []):
            names.update(x for x in metric if isinstance(x, str))
    missing = set(QUEUE_METRICS + WEBHOOK_METRICS) - names
    assert not missing, missing


# --------------------------------------------------------------------------- outputs and files


def test_outputs(template):
    outputs = template["Outputs"]
    url = outputs["JenkinsNotificationUrl"]["Value"]["Fn::Sub"]
    assert url.startswith("https://${WebhookApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}/jenkins/notify")
    assert url.endswith("?token=<WEBHOOK SECRET>")
    assert outputs["JenkinsNotificationFunctionUrl"]["Condition"] == "CreateFunctionUrl"
    for name in ("DispatcherFunctionName", "WebhookFunctionName", "MigrateFunctionName", "DispatcherDeadLetterQueueUrl"):
        assert name in outputs


def test_events_and_samconfig_exist():
    events = ROOT / "events"
    for name in ("dispatcher-scheduled-rule", "dispatcher-scheduler", "dispatcher-manual", "dispatcher-max-jobs",
                 "migrate-create", "migrate-update", "migrate-delete"):
        json.loads((events / f"{name}.json").read_text())
    assert json.loads((events / "dispatcher-manual.json").read_text()) == {}
    assert json.loads((events / "dispatcher-max-jobs.json").read_text()) == {"max_jobs": 5}
    config = (ROOT / "samconfig.toml").read_text()
    import tomllib

    deploy = tomllib.loads(config)["default"]["deploy"]["parameters"]
    assert deploy["stack_name"] == "jenkins-dispatch"
    assert deploy["capabilities"] == "CAPABILITY_IAM"
    assert deploy["confirm_changeset"] is True and deploy["resolve_s3"] is True


# --------------------------------------------------------------------------- linters


def _dashboard_metrics(resources) -> set[str]:
    """Metric names of namespace JenkinsDispatch on the dashboard ("." repeats the row above's value)."""
    import re

    [dashboard] = [r for r in resources.values() if r["Type"] == "AWS::CloudWatch::Dashboard"]
    body = dashboard["Properties"]["DashboardBody"]
    body = body.get("Fn::Sub", body) if isinstance(body, dict) else body
    body = body[0] if isinstance(body, list) else body
    doc = json.loads(re.sub(r"\$\{[^}]+\}", "1", body))  # placeholders sit in strings and numbers
    names = set()
    for widget in doc["widgets"]:
        previous: list = []
        for row in widget.get("properties", {}).get("metrics", []):
            fields = [f for f in row if not isinstance(f, dict)]
            if fields[:1] == ["..."]:
                continue
            fields = [previous[i] if f == "." and i < len(previous) else f for i, f in enumerate(fields)]
            previous = fields
            if fields[0] == "JenkinsDispatch":
                names.add(fields[1])
    return names


def test_every_metric_the_template_watches_is_emitted_by_the_code(resources):
    """Alarms and the dashboard name metrics; a renamed metric would leave them silent forever."""
    watched = _dashboard_metrics(resources)
    for resource in resources.values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::CloudWatch::Alarm" and props.get("Namespace") == "JenkinsDispatch":
            watched.add(props["MetricName"])
    assert {"JobsFailed", "OldestPendingAgeSeconds", "LeasesExpired", "NotificationsRejectedAuth"} <= watched
    source = "".join(p.read_text() for p in (ROOT / "layers/shared/jenkins_dispatch").rglob("*.py"))
    missing = sorted(name for name in watched if f'"{name}"' not in source)
    assert missing == [], f"watched by template.yaml but never emitted: {missing}"
