// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Validates Kubernetes objects against the API's OpenAPI schemas, offline:
// the validators that the npm package kubernetes-models ships compiled
// (scripts/install-deps.sh installs it). Reads a JSON array of objects on
// stdin; prints one JSON line per object ({kind, name, errors, unknown}) and
// exits 1 if any object has an error.
//
// The API's schemas leave additionalProperties open, so a misspelt field
// would pass them; kubectl and the API server refuse it (strict field
// validation). So every object goes through the validator behind a proxy
// that notes which fields the validator reads: a field it never reads is
// one the schema does not define, and is reported as unknown.
"use strict";
const path = require("path");

// apiVersion/kind -> the schema's name in kubernetes-models/_schemas.
const SCHEMAS = {
	"v1/Namespace": "IoK8sApiCoreV1Namespace",
	"v1/ConfigMap": "IoK8sApiCoreV1ConfigMap",
	"v1/ServiceAccount": "IoK8sApiCoreV1ServiceAccount",
	"v1/Service": "IoK8sApiCoreV1Service",
	"apps/v1/DaemonSet": "IoK8sApiAppsV1DaemonSet",
	"apps/v1/Deployment": "IoK8sApiAppsV1Deployment",
};

function schemaDir() {
	// The package's exports hide _schemas/; its files are found by path.
	return path.join(path.dirname(require.resolve("kubernetes-models/apps/v1")), "..", "..",
		"_schemas");
}

function track(value, at, seen) {
	if (value === null || typeof value !== "object")
		return value;
	let copy;
	if (Array.isArray(value)) {
		copy = value.map((v, i) => track(v, `${at}/${i}`, seen));
	} else {
		copy = {};
		for (const [k, v] of Object.entries(value)) {
			seen.set(`${at}/${k}`, false);
			copy[k] = track(v, `${at}/${k}`, seen);
		}
	}
	return new Proxy(copy, {
		get(target, prop, receiver) {
			if (typeof prop === "string" && seen.has(`${at}/${prop}`))
				seen.set(`${at}/${prop}`, true);
			return Reflect.get(target, prop, receiver);
		},
	});
}

function check(obj) {
	const key = `${obj.apiVersion}/${obj.kind}`;
	const name = obj.metadata && obj.metadata.name;
	const schema = SCHEMAS[key];
	if (!schema)
		return { kind: key, name, errors: [`no schema known for ${key}`], unknown: [] };
	const { validate } = require(path.join(schemaDir(), `${schema}.js`));
	const seen = new Map();
	const ok = validate(track(obj, "", seen));
	const errors = ok ? [] : validate.errors.map((e) =>
		`${e.instancePath || "/"}: ${e.message || e.keyword} ${JSON.stringify(e.params)}`);
	// The fields of an unknown field are not reported again.
	const unread = [...seen].filter(([, read]) => !read).map(([at]) => at);
	const unknown = unread.filter((at) => !unread.some((u) => at.startsWith(`${u}/`)));
	return { kind: key, name, errors, unknown };
}

function main() {
	const docs = JSON.parse(require("fs").readFileSync(0, "utf8"));
	const version = require(path.join(schemaDir(), "..", "package.json")).version;
	let bad = 0;
	for (const doc of docs) {
		const r = check(doc);
		r.validator = `kubernetes-models ${version}`;
		if (r.errors.length || r.unknown.length)
			bad++;
		console.log(JSON.stringify(r));
	}
	process.exit(bad ? 1 : 0);
}

main();
