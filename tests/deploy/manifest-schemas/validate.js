// Validates every object of a v1 List (`vigil install --output json`) against
// the OpenAPI schema of its apiVersion and kind: kubernetes-models for the
// Kubernetes API, @kubernetes-models/prometheus-operator for ServiceMonitor and
// PrometheusRule. Their validators check types, required fields, enums and
// formats; they accept unknown fields, so a misspelt optional field is not
// caught here (install_manifests_test checks the fields vigil relies on).
//
//   node validate.js FILE      exit 0 when every object is valid
"use strict";
const fs = require("fs");

function modulePath(apiVersion, kind) {
  if (apiVersion.startsWith("monitoring.coreos.com/"))
    return `@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`;
  return `kubernetes-models/${apiVersion}/${kind}`;
}

const list = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
if (list.kind !== "List" || !Array.isArray(list.items)) {
  console.error(`${process.argv[2]}: not a v1 List`);
  process.exit(2);
}
let failures = 0;
for (const item of list.items) {
  const what = `${item.kind} ${item.metadata && item.metadata.namespace ? item.metadata.namespace + "/" : ""}${item.metadata && item.metadata.name}`;
  let Model;
  try {
    Model = require(modulePath(item.apiVersion, item.kind))[item.kind];
  } catch (e) {
    console.error(`FAIL ${what}: no schema for ${item.apiVersion} ${item.kind}`);
    failures++;
    continue;
  }
  try {
    new Model(item).validate();
    console.log(`ok   ${what}`);
  } catch (e) {
    console.error(`FAIL ${what}: ${e.message}`);
    failures++;
  }
}
console.log(`${list.items.length - failures} of ${list.items.length} objects valid`);
process.exit(failures === 0 ? 0 : 1);
