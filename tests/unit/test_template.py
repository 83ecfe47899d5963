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
SECRET_PARAMETERS = {"DbSecretArn", "JenkinsSecretArn", "WebhookSecretArn", "JenkinsControllersSecretArn"}


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
    assert fn["Architectures"] == [{"Ref": "Architecture"}]
    assert fn["Layers"] == [{"Ref": "SharedLayer"}]
    assert fn["VpcConfig"] == {"SubnetIds": {"Ref": "SubnetIds"}, "SecurityGroupIds": {"Ref": "SecurityGroupIds"}}
    env = fn["Environment"]["Variables"]
    assert env["POWERTOOLS_SERVICE_NAME"] == "jenkins-dispatch"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "JenkinsDispatch"
    assert env["DB_HOST"]["Fn::If"][2] == {"Ref": "DbHost"} and env["DB_IAM_AUTH"]["Fn::If"][2] == {"Ref": "DbIamAuth"}
    assert env["DB_SECRET_ARN"] == {"Fn::If": ["FunctionsReadDbSecret", {"Ref": "DbSecretArn"}, {"Ref": "AWS::NoValue"}]}


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
    assert layer["Properties"]["CompatibleArchitectures"] == [{"Ref": "Architecture"}]
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    makefile = (ROOT / "layers/shared/Makefile").read_text()
    assert "build-SharedLayer:" in makefile and "manylinux2014_x86_64" in makefile
    assert "--invalidation-mode unchecked-hash" in makefile
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
        ("DispatcherFunction", {"JenkinsSecretArn", "DbSecretArn", "JenkinsControllersSecretArn"}),
        ("WebhookFunction", {"WebhookSecretArn", "DbSecretArn", "JenkinsSecretArn", "JenkinsControllersSecretArn"}),
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
                if ref["Ref"] == "DbSecretArn":  # not through the stack's proxy: IAM tokens there
                    assert "FunctionsReadDbSecret" in (cond, condition)
                if ref["Ref"] == "JenkinsControllersSecretArn":  # several controllers only
                    assert condition == "HasControllersSecret"
                if ref["Ref"] == "JenkinsSecretArn" and function == "WebhookFunction":
                    assert condition == "HasControllersSecret"  # the webhook reads Jenkins only for the URLs
                named.add(ref["Ref"])
        elif actions == ["rds-db:connect"]:
            rds_connect.append((condition, resources_))
        else:
            assert actions == ["kms:Decrypt"] and condition == "HasKmsKey"
    assert named == secrets
    assert len(rds_connect) == 1
    condition, res = rds_connect[0]
    assert condition == "ConnectWithIamToken"
    [(proxy_condition, through_proxy, direct)] = [r["Fn::If"] for r in res]
    assert proxy_condition == "UseRdsProxy"
    assert through_proxy["Fn::Sub"][0] == (
        "arn:${AWS::Partition}:rds-db:${AWS::Region}:${AWS::AccountId}:dbuser:${ProxyId}/${DbUser}")
    assert through_proxy["Fn::Sub"][1] == {
        "ProxyId": {"Fn::Select": [6, {"Fn::Split": [":", {"Fn::GetAtt": ["DbProxy", "DBProxyArn"]}]}]}}
    assert direct == {"Fn::Sub": "arn:${AWS::Partition}:rds-db:${AWS::Region}:${AWS::AccountId}:dbuser:${DbResourceId}/${DbUser}"}
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
    assert int(params["ReservedConcurrency"]["Default"]) == 2  # continuous dispatch overlaps two invocations
    assert int(params["MaxInFlight"]["Default"]) == 0
    assert int(params["LeaseSeconds"]["Default"]) > int(params["JenkinsTimeoutSeconds"]["Default"])
    for name in params:
        assert params[name].get("Description"), f"{name} has no Description"
    grouped = {p for group in template["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
               for p in group["Parameters"]}
    assert sorted(set(params) - grouped) == [], "parameters the console would show outside any group"


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
            if not fields:  # a metric-math or SEARCH expression: test_dashboard_per_controller reads those
                continue
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
    # Powertools names ColdStart itself, for the handlers that ask for it.
    if all("capture_cold_start_metric=True" in (ROOT / "functions" / f / "app.py").read_text()
           for f in ("dispatcher", "webhook")):
        watched.discard("ColdStart")
    missing = sorted(name for name in watched if f'"{name}"' not in source)
    assert missing == [], f"watched by template.yaml but never emitted: {missing}"


# --------------------------------------------------------------------------- production habits (issue 26)
# Each test below asserts one habit a platform team requires; together with the expanded template (the SAM
# transform run offline) they check what CloudFormation would really create, not only what the YAML says.

ALIAS = "live"
BOUNDARY = {"Fn::If": ["HasPermissionsBoundary", {"Ref": "PermissionsBoundaryArn"}, {"Ref": "AWS::NoValue"}]}


@pytest.fixture(scope="module")
def expanded() -> dict:
    """The template after the SAM transform, offline (what CloudFormation would be asked to create)."""
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
        return samtranslator.transform(doc, {}, Policies())
    finally:
        if old is None:
            os.environ.pop("AWS_DEFAULT_REGION", None)


def _refs(value) -> set[str]:
    """Every logical id a value points at (Ref, GetAtt, or ${...} inside a Sub)."""
    import re

    found: set[str] = set()
    for v in _walk(value):
        if isinstance(v, dict):
            if isinstance(v.get("Ref"), str):
                found.add(v["Ref"])
            if "Fn::GetAtt" in v:
                target = v["Fn::GetAtt"]
                found.add(target[0] if isinstance(target, list) else target.split(".")[0])
            if "Fn::Sub" in v:
                text = v["Fn::Sub"] if isinstance(v["Fn::Sub"], str) else v["Fn::Sub"][0]
                found.update(m.split(".")[0] for m in re.findall(r"\$\{([^}!]+)\}", text))
    return found


def test_arm64_by_default_and_x86_64_by_parameter(template, resources):
    param = template["Parameters"]["Architecture"]
    assert param["Default"] == "arm64" and set(param["AllowedValues"]) == {"arm64", "x86_64"}
    assert template["Globals"]["Function"]["Architectures"] == [{"Ref": "Architecture"}]
    layer = resources["SharedLayer"]
    assert layer["Properties"]["CompatibleArchitectures"] == [{"Ref": "Architecture"}]
    assert layer["Metadata"]["BuildArchitecture"] == {"Ref": "Architecture"}
    makefile = (ROOT / "layers/shared/Makefile").read_text()
    assert "manylinux2014_aarch64" in makefile and "manylinux2014_x86_64" in makefile
    # `make build ARCH=...` hands the architecture to the layer's Makefile and keeps one build cache per
    # architecture (sam build's cache key does not see LAMBDA_ARCH).
    sam_mk = (ROOT / "sam.mk").read_text()
    assert "LAMBDA_ARCH=$(ARCH)" in sam_mk and "--cache-dir .aws-sam/cache-$(ARCH)" in sam_mk
    assert "--parameter-overrides Architecture=$(ARCH)" in sam_mk


def test_both_scheduled_and_http_functions_publish_versions_behind_an_alias(resources):
    for name in ("DispatcherFunction", "WebhookFunction"):
        assert resources[name]["Properties"]["AutoPublishAlias"] == ALIAS, name


def test_webhook_deploys_gradually_and_rolls_back_on_its_alarms(template, resources):
    props = resources["WebhookFunction"]["Properties"]
    preference = props["DeploymentPreference"]
    assert preference["Type"] == {"Ref": "WebhookDeploymentType"}
    kinds = template["Parameters"]["WebhookDeploymentType"]
    assert kinds["Default"].startswith("Canary")
    assert any(k.startswith("Linear") for k in kinds["AllowedValues"])
    assert any(k.startswith("Canary") for k in kinds["AllowedValues"])
    alarms = {a["Ref"] for a in preference["Alarms"]}
    assert alarms == {"WebhookErrorsAlarm", "WebhookLatencyAlarm"}
    watched = {}
    for name in alarms:
        alarm = resources[name]["Properties"]
        assert alarm["Namespace"] == "AWS/Lambda"
        dims = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
        # The new version behind the alias, as SAM's safe-deployment guide does: an old version's errors must
        # not roll back a good release, and the new one's must.
        assert dims["FunctionName"] == {"Ref": "WebhookFunction"}
        assert dims["Resource"] == {"Fn::Sub": "${WebhookFunction}:" + ALIAS}
        assert dims["ExecutedVersion"] == {"Fn::GetAtt": ["WebhookFunction", "Version.Version"]}
        watched[alarm["MetricName"]] = alarm
    assert set(watched) == {"Errors", "Duration"}
    assert watched["Duration"]["Threshold"] == {"Ref": "WebhookLatencyAlarmMilliseconds"}
    assert watched["Duration"]["ExtendedStatistic"] == "p99"


def test_schedule_http_api_and_function_url_invoke_the_alias(expanded):
    res = expanded["Resources"]
    aliases = {k for k, v in res.items() if v["Type"] == "AWS::Lambda::Alias"}
    assert {"DispatcherFunctionAlias" + ALIAS, "WebhookFunctionAlias" + ALIAS} <= aliases
    [schedule] = [v for v in res.values() if v["Type"] == "AWS::Scheduler::Schedule"]
    assert _refs(schedule["Properties"]["Target"]["Arn"]) == {"DispatcherFunctionAlias" + ALIAS}
    [integration] = [v for v in res.values() if v["Type"] == "AWS::ApiGatewayV2::Integration"] or [None]
    if integration is None:  # SAM writes the route into the API's OpenAPI body
        text = json.dumps(res["WebhookApi"]["Properties"]["Body"])
        assert "WebhookFunctionAlias" + ALIAS in text and '"WebhookFunction.Arn"' not in text
    url = res["WebhookFunctionUrl"]
    assert url["Properties"]["Qualifier"] == ALIAS
    for perm in (v for v in res.values() if v["Type"] == "AWS::Lambda::Permission"):
        target = perm["Properties"]["FunctionName"]
        assert _refs(target) & {"DispatcherFunctionAlias" + ALIAS, "WebhookFunctionAlias" + ALIAS}, perm


def test_schedule_retries_then_dead_letters_to_an_alarmed_queue(resources, expanded):
    schedule = resources["DispatcherFunction"]["Properties"]["Events"]["Schedule"]["Properties"]
    retry = schedule["RetryPolicy"]
    assert retry["MaximumRetryAttempts"] >= 1
    assert 60 <= retry["MaximumEventAgeInSeconds"] <= 900
    assert schedule["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": ["DispatcherDeadLetterQueue", "Arn"]}}
    depth = [a["Properties"] for a in resources.values() if a["Type"] == "AWS::CloudWatch::Alarm"
             and a["Properties"].get("MetricName") == "ApproximateNumberOfMessagesVisible"]
    assert [d["Dimensions"][0]["Value"] for d in depth] == [{"Fn::GetAtt": ["DispatcherDeadLetterQueue", "QueueName"]}]
    # What CloudFormation gets: the schedule's target names the queue, and its role may send to it.
    res = expanded["Resources"]
    [sched] = [v for v in res.values() if v["Type"] == "AWS::Scheduler::Schedule"]
    target = sched["Properties"]["Target"]
    assert _refs(target["DeadLetterConfig"]) == {"DispatcherDeadLetterQueue"}
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == retry["MaximumRetryAttempts"]
    role = res[_refs(target["RoleArn"]).pop()]
    text = json.dumps(role["Properties"]["Policies"])
    assert "sqs:SendMessage" in text and "DispatcherDeadLetterQueue" in text


def test_throttle_alarms_on_both_functions(resources):
    throttled = {}
    for alarm in resources.values():
        props = alarm["Properties"] if alarm["Type"] == "AWS::CloudWatch::Alarm" else {}
        if props.get("Namespace") == "AWS/Lambda" and props.get("MetricName") == "Throttles":
            [dim] = props["Dimensions"]
            throttled[dim["Value"]["Ref"]] = props
    assert set(throttled) == {"DispatcherFunction", "WebhookFunction"}
    for props in throttled.values():
        assert props["Statistic"] == "Sum" and props["Threshold"] >= 1
        assert props["TreatMissingData"] == "notBreaching"


def test_alarm_when_a_dispatcher_invocation_nears_its_timeout(resources):
    props = resources["DispatcherNearTimeoutAlarm"]["Properties"]
    [duration] = [m for m in props["Metrics"] if "MetricStat" in m]
    metric = duration["MetricStat"]["Metric"]
    assert (metric["Namespace"], metric["MetricName"]) == ("AWS/Lambda", "Duration")
    assert metric["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": "DispatcherFunction"}}]
    assert duration["MetricStat"]["Stat"] == "Maximum"
    [spare] = [m for m in props["Metrics"] if "Expression" in m]
    # Seconds left before the timeout, computed from the timeout parameter itself.
    assert "${DispatcherTimeoutSeconds}" in spare["Expression"]["Fn::Sub"]
    assert props["ComparisonOperator"] == "LessThanThreshold"
    # Continuous invocations stop claiming TIME_MARGIN_SECONDS (10) + the Jenkins timeout before the end and
    # their last triggers end by the margin: an invocation still running 5 s before it is killed is in trouble.
    assert props["Threshold"] == 5


def test_permissions_boundary_on_every_role_the_stack_creates(template, expanded):
    param = template["Parameters"]["PermissionsBoundaryArn"]
    assert param["Default"] == ""
    assert template["Conditions"]["HasPermissionsBoundary"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "PermissionsBoundaryArn"}, ""]}]}
    roles = {k: v for k, v in expanded["Resources"].items() if v["Type"] == "AWS::IAM::Role"}
    # The three functions, the schedule's role, CodeDeploy's, and the RDS Proxy's (under its condition).
    assert len(roles) >= 6, sorted(roles)
    for name, role in roles.items():
        assert role["Properties"].get("PermissionsBoundary") == BOUNDARY, name


def test_tags_on_every_taggable_resource(template, expanded):
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    params = template["Parameters"]
    for name in ("EnvironmentTag", "OwnerTag", "CostCenterTag"):
        # CloudWatch alarms and dashboards refuse an empty tag value: every tag has a non-empty default.
        assert params[name]["Type"] == "String" and params[name]["Default"], name
    wanted = {"Application": "jenkins-dispatch", "Environment": {"Ref": "EnvironmentTag"},
              "Owner": {"Ref": "OwnerTag"}, "CostCenter": {"Ref": "CostCenterTag"}}
    untagged = []
    for name, res in expanded["Resources"].items():
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", res["Type"]).schema
        if not schema.get("tagging", {}).get("taggable") or "Tags" not in schema.get("properties", {}):
            continue
        tags = res.get("Properties", {}).get("Tags")
        if tags is None and "Body" in res.get("Properties", {}):  # an HTTP API's tags live in its OpenAPI body
            tags = {t["name"]: t["x-amazon-apigateway-tag-value"] for t in res["Properties"]["Body"].get("tags", [])}
        if isinstance(tags, list):
            tags = {t["Key"]: t["Value"] for t in tags}
        if not tags or any(tags.get(k) != v for k, v in wanted.items()):
            untagged.append(f"{name} ({res['Type']}): {tags}")
    assert untagged == []


def test_reserved_concurrency_bounds_the_database_connections(template, resources):
    params = template["Parameters"]
    webhook = params["WebhookReservedConcurrency"]
    assert 2 <= int(webhook["Default"]) <= 20 and int(webhook["MinValue"]) == 0
    assert resources["WebhookFunction"]["Properties"]["ReservedConcurrentExecutions"] == {
        "Fn::If": ["HasWebhookReserved", {"Ref": "WebhookReservedConcurrency"}, {"Ref": "AWS::NoValue"}]}
    assert template["Conditions"]["HasWebhookReserved"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "WebhookReservedConcurrency"}, 0]}]}
    # Continuous dispatch overlaps two invocations: the default reserves 2, and 1 is refused by a rule.
    assert int(params["ReservedConcurrency"]["Default"]) == 2
    rule = template["Rules"]["ContinuousDispatchOverlaps"]
    assert rule["RuleCondition"] == {"Fn::Equals": [{"Ref": "ContinuousDispatch"}, "true"]}
    assert rule["Assertions"][0]["Assert"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "ReservedConcurrency"}, "1"]}]}
    deploy = (ROOT / "docs/deploy.md").read_text()
    assert "WebhookReservedConcurrency" in deploy and "max_connections" in deploy


def test_optional_rds_proxy_with_iam_auth(template, resources):
    assert template["Conditions"]["UseRdsProxy"] == {"Fn::Equals": [{"Ref": "CreateRdsProxy"}, "true"]}
    assert template["Parameters"]["CreateRdsProxy"]["Default"] == "false"
    proxy = resources["DbProxy"]
    assert proxy["Type"] == "AWS::RDS::DBProxy" and proxy["Condition"] == "UseRdsProxy"
    props = proxy["Properties"]
    assert props["RequireTLS"] is True
    [auth] = props["Auth"]
    assert auth["IAMAuth"] == "REQUIRED" and auth["SecretArn"] == {"Ref": "DbSecretArn"}
    assert props["RoleArn"] == {"Fn::GetAtt": ["DbProxyRole", "Arn"]}
    assert resources["DbProxyTargetGroup"]["Condition"] == "UseRdsProxy"
    role = resources["DbProxyRole"]
    assert role["Condition"] == "UseRdsProxy"
    assert role["Properties"]["PermissionsBoundary"] == BOUNDARY
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    assert env["DB_HOST"] == {"Fn::If": ["UseRdsProxy", {"Fn::GetAtt": ["DbProxy", "Endpoint"]}, {"Ref": "DbHost"}]}
    assert env["DB_IAM_AUTH"] == {"Fn::If": ["UseRdsProxy", "true", {"Ref": "DbIamAuth"}]}
    # Through the proxy the functions never read the password; rds-db:connect names the proxy's id.
    for function in ("DispatcherFunction", "WebhookFunction", "MigrateFunction"):
        text = json.dumps(resources[function]["Properties"]["Policies"])
        assert "DbProxy" in text and "dbuser" in text, function
    assert template["Outputs"]["DbProxyEndpoint"]["Condition"] == "UseRdsProxy"
    deploy = (ROOT / "docs/deploy.md").read_text()
    assert "CreateRdsProxy" in deploy and "pin" in deploy and "LISTEN" in deploy


def test_custom_resource_route_out_through_an_optional_s3_gateway_endpoint(template, resources):
    endpoint = resources["S3GatewayEndpoint"]
    assert endpoint["Type"] == "AWS::EC2::VPCEndpoint" and endpoint["Condition"] == "CreateS3Endpoint"
    props = endpoint["Properties"]
    assert props["VpcEndpointType"] == "Gateway"
    assert props["ServiceName"] == {"Fn::Sub": "com.amazonaws.${AWS::Region}.s3"}
    assert props["VpcId"] == {"Ref": "VpcId"} and props["RouteTableIds"] == {"Ref": "RouteTableIds"}
    assert template["Parameters"]["CreateS3GatewayEndpoint"]["Default"] == "false"
    rule = template["Rules"]["S3GatewayEndpointPlacement"]
    assert rule["RuleCondition"] == {"Fn::Equals": [{"Ref": "CreateS3GatewayEndpoint"}, "true"]}
    # The custom resource waits for the route: CloudFormation creates the endpoint first.
    assert "S3GatewayEndpoint" in _refs(resources["Migrations"]["Properties"])
    deploy = (ROOT / "docs/deploy.md").read_text()
    assert "CreateS3GatewayEndpoint" in deploy and "cloudformation-custom-resource-response" in deploy


def test_the_layer_build_downloads_nothing_and_checks_the_ca_bundle():
    makefile = (ROOT / "layers/shared/Makefile").read_text()
    assert "curl" not in makefile and "truststore.pki.rds.amazonaws.com" not in makefile
    bundle = ROOT / "layers/shared/rds-ca-bundle.pem"
    digest = (ROOT / "layers/shared/rds-ca-bundle.pem.sha256").read_text().split()[0]
    import hashlib

    assert hashlib.sha256(bundle.read_bytes()).hexdigest() == digest
    assert "rds-ca-bundle.pem.sha256" in makefile
    assert "rds-ca-refresh:" in (ROOT / "sam.mk").read_text()


def test_the_expanded_schedule_is_accepted_by_the_scheduler_api_with_its_dead_letter_queue(expanded, monkeypatch):
    """The Schedule SAM generates, created through EventBridge Scheduler's API (moto, in memory) against a real
    queue: the API takes the retry policy and dead-letter queue as written, and the queue's depth is what the
    alarm watches."""
    mock_aws = pytest.importorskip("moto").mock_aws
    import boto3

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    res = expanded["Resources"]
    [(name, schedule)] = [(k, v) for k, v in res.items() if v["Type"] == "AWS::Scheduler::Schedule"]
    alarm = res["DeadLetterQueueAlarm"]["Properties"]
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue_url = sqs.create_queue(QueueName="jd-dispatcher-dlq")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        known = {
            "DispatcherDeadLetterQueue": {"Arn": queue_arn, "QueueName": "jd-dispatcher-dlq"},
            "DispatcherFunctionAliaslive": "arn:aws:lambda:us-east-1:123456789012:function:jd-dispatcher:live",
            "DispatcherFunctionScheduleRole": {"Arn": "arn:aws:iam::123456789012:role/jd-schedule"},
            "AWS::StackName": "jd", "ScheduleExpression": "rate(1 minute)", "ScheduleState": "ENABLED",
        }

        def resolve(value):
            if isinstance(value, dict) and "Ref" in value:
                return known[value["Ref"]]
            if isinstance(value, dict) and "Fn::GetAtt" in value:
                target, attribute = value["Fn::GetAtt"]
                return known[target][attribute]
            if isinstance(value, dict) and "Fn::Sub" in value:
                import re

                return re.sub(r"\$\{([^}]+)\}", lambda m: known[m.group(1)], value["Fn::Sub"])
            if isinstance(value, dict):
                return {k: resolve(v) for k, v in value.items()}
            if isinstance(value, list):
                return [resolve(v) for v in value]
            return value

        props = resolve(schedule["Properties"])
        scheduler = boto3.client("scheduler", region_name="us-east-1")
        scheduler.create_schedule(**props)
        stored = scheduler.get_schedule(Name=props["Name"])
        assert stored["Target"]["DeadLetterConfig"] == {"Arn": queue_arn}, name
        assert stored["Target"]["RetryPolicy"] == props["Target"]["RetryPolicy"]
        assert stored["Target"]["Arn"].endswith(":live")
        # The alarm names the same queue.
        assert resolve(alarm["Dimensions"]) == [{"Name": "QueueName", "Value": "jd-dispatcher-dlq"}]
        cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
        cloudwatch.put_metric_alarm(AlarmName="dlq", **{k: resolve(v) for k, v in alarm.items()
                                                        if k not in ("AlarmActions", "OKActions", "Tags")})
        [stored_alarm] = cloudwatch.describe_alarms(AlarmNames=["dlq"])["MetricAlarms"]
        assert stored_alarm["Dimensions"] == [{"Name": "QueueName", "Value": "jd-dispatcher-dlq"}]


# --------------------------------------------------------------------------- several controllers (issue 23)

HAS_CONTROLLERS = {"Fn::Not": [{"Fn::Equals": [{"Ref": "JenkinsControllersSecretArn"}, ""]}]}


def _only_with_controllers(value):
    return {"Fn::If": ["HasControllersSecret", value, {"Ref": "AWS::NoValue"}]}


def test_the_controllers_secret_is_an_optional_parameter(template):
    param = template["Parameters"]["JenkinsControllersSecretArn"]
    assert param["Type"] == "String" and param["Default"] == ""
    assert param["AllowedPattern"] == template["Parameters"]["JenkinsSecretArn"]["AllowedPattern"].join(["^$|", ""])
    assert template["Conditions"]["HasControllersSecret"] == HAS_CONTROLLERS
    [group] = [g for g in template["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
               if "JenkinsSecretArn" in g["Parameters"]]
    assert "JenkinsControllersSecretArn" in group["Parameters"]


def test_the_dispatcher_and_the_webhook_get_the_controllers_secret_only_when_it_is_set(resources):
    """The one dispatcher function serves every controller; the webhook needs every controller's URL (the
    default one's included) to tell which controller a build belongs to."""
    controllers_arn = _only_with_controllers({"Ref": "JenkinsControllersSecretArn"})
    dispatcher = resources["DispatcherFunction"]["Properties"]["Environment"]["Variables"]
    assert dispatcher["JENKINS_CONTROLLERS_SECRET_ARN"] == controllers_arn
    assert dispatcher["JENKINS_SECRET_ARN"] == {"Ref": "JenkinsSecretArn"}
    webhook = resources["WebhookFunction"]["Properties"]["Environment"]["Variables"]
    assert webhook["JENKINS_CONTROLLERS_SECRET_ARN"] == controllers_arn
    assert webhook["JENKINS_SECRET_ARN"] == _only_with_controllers({"Ref": "JenkinsSecretArn"})
    assert "JENKINS_CONTROLLERS_SECRET_ARN" not in resources["MigrateFunction"]["Properties"].get(
        "Environment", {}).get("Variables", {})
    assert sum(1 for r in resources.values() if r["Type"] == "AWS::Serverless::Function"
               and "dispatcher" in str(r["Properties"].get("CodeUri", ""))) == 1


@pytest.mark.parametrize(("function", "sid", "arns"), [
    ("DispatcherFunction", "ReadControllersSecret", {"Ref": "JenkinsControllersSecretArn"}),
    ("WebhookFunction", "ReadControllersSecrets", [{"Ref": "JenkinsSecretArn"}, {"Ref": "JenkinsControllersSecretArn"}]),
])
def test_reading_the_controllers_secret_is_allowed_on_that_arn_only_and_only_when_it_is_set(resources, function,
                                                                                             sid, arns):
    [statement] = [s for s in _statements(resources[function])
                   if "Fn::If" in s and s["Fn::If"][1].get("Sid") == sid]
    assert statement == _only_with_controllers({
        "Sid": sid, "Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": arns})
    # Nowhere else: no unconditional statement names the controllers' secret.
    for raw in _statements(resources[function]):
        condition, _st = _unwrap(raw)
        if condition != "HasControllersSecret":
            assert "JenkinsControllersSecretArn" not in json.dumps(raw)


def test_the_expanded_roles_read_the_controllers_secret_under_the_condition(expanded):
    for role in ("DispatcherFunctionRole", "WebhookFunctionRole"):
        text = json.dumps(expanded["Resources"][role]["Properties"]["Policies"])
        assert '"HasControllersSecret"' in text and '"JenkinsControllersSecretArn"' in text, role
    assert "JenkinsControllersSecretArn" not in json.dumps(expanded["Resources"]["MigrateFunctionRole"])


def test_the_jenkins_unavailable_alarm_still_watches_every_controller(resources):
    """The dispatcher publishes JenkinsUnavailable under `service` alone whatever the number of controllers
    (tests/unit/test_controller_metrics.py): the alarm's dimensions must stay exactly those."""
    props = resources["JenkinsUnavailableAlarm"]["Properties"]
    assert (props["Namespace"], props["MetricName"]) == ("JenkinsDispatch", "JenkinsUnavailable")
    assert props["Dimensions"] == [{"Name": "service", "Value": "jenkins-dispatch"}]
    assert "per controller" in props["AlarmDescription"]


def test_dashboard_per_controller(resources):
    import re

    body_template, _variables = resources["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    body = json.loads(re.sub(r"\$\{[^}]+\}", "0", body_template))
    [widget] = [w for w in body["widgets"] if "per controller" in w.get("properties", {}).get("title", "")]
    [[row]] = widget["properties"]["metrics"]
    expression = row["expression"]
    assert expression.startswith("SEARCH('{JenkinsDispatch,controller,service} ")
    assert 'MetricName="JenkinsUnavailable"' in expression and 'service="jenkins-dispatch"' in expression
    assert expression.endswith(", 'Sum', 60)")
    # The label is CloudWatch's dynamic one (the controller's name), kept literal by Fn::Sub's ${!...}.
    assert "\"label\": \"${!PROP('Dim.controller')}\"" in body_template
    # Below the others, overlapping none.
    others = [w for w in body["widgets"] if w is not widget]
    assert widget["y"] >= max(w["y"] + w["height"] for w in others)
