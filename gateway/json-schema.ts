/**
 * A validator for the part of JSON Schema (2020-12) that `z.toJSONSchema` writes for the relay
 * protocol's schemas (see relay-checks.ts): the gateway checks the Worker's answers and requests
 * with it instead of loading zod, which costs about 9 MiB of the gateway's RSS
 * (docs/capacity.md). A keyword it does not know is refused when the schema is compiled, never ignored, so a
 * schema it cannot fully check fails loudly (test/node/relay-schemas.test.ts compiles them all).
 */
export type JsonSchema = { [keyword: string]: unknown } | boolean;

/** Checks a value; answers null when it fits, else what is wrong and where (`$.a[2].b`). */
export type Check = (value: unknown, at?: string) => string | null;

const IGNORED = new Set(['$schema', 'description', 'title', 'examples']);

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function fitsType(value: unknown, type: string): boolean {
  const actual = typeOf(value);
  return actual === type || (type === 'number' && actual === 'integer');
}

const show = (value: unknown): string => JSON.stringify(value) ?? String(value);

/** Compiles a schema into a check; throws on a keyword or form it does not know. */
export function compileSchema(schema: JsonSchema, where = '#'): Check {
  if (schema === true) return () => null;
  if (schema === false) return (_, at = '$') => `${at}: no value is allowed here`;
  const checks: Check[] = [];
  for (const [keyword, argument] of Object.entries(schema)) {
    if (IGNORED.has(keyword)) continue;
    const check = compileKeyword(keyword, argument, schema, `${where}/${keyword}`);
    if (check) checks.push(check);
  }
  return (value, at = '$') => {
    for (const check of checks) {
      const problem = check(value, at);
      if (problem) return problem;
    }
    return null;
  };
}

function compileKeyword(
  keyword: string,
  argument: unknown,
  schema: { [keyword: string]: unknown },
  where: string,
): Check | null {
  const isObject = (v: unknown): v is Record<string, unknown> => typeOf(v) === 'object';
  const number = (): number => {
    if (typeof argument !== 'number') throw new Error(`${where}: expected a number`);
    return argument;
  };
  switch (keyword) {
    case 'type': {
      const types = Array.isArray(argument) ? (argument as string[]) : [argument as string];
      return (value, at) => (types.some((t) => fitsType(value, t)) ? null : `${at}: expected ${types.join(' or ')}`);
    }
    case 'const':
      return (value, at) => (value === argument ? null : `${at}: expected ${show(argument)}`);
    case 'enum': {
      const allowed = argument as unknown[];
      return (value, at) => (allowed.includes(value) ? null : `${at}: expected one of ${show(allowed)}`);
    }
    case 'minimum': {
      const min = number();
      return (value, at) => (typeof value !== 'number' || value >= min ? null : `${at}: below ${min}`);
    }
    case 'exclusiveMinimum': {
      const min = number();
      return (value, at) => (typeof value !== 'number' || value > min ? null : `${at}: not above ${min}`);
    }
    case 'maximum': {
      const max = number();
      return (value, at) => (typeof value !== 'number' || value <= max ? null : `${at}: above ${max}`);
    }
    case 'minLength': {
      const min = number();
      return (value, at) => (typeof value !== 'string' || value.length >= min ? null : `${at}: shorter than ${min}`);
    }
    case 'maxLength': {
      const max = number();
      return (value, at) => (typeof value !== 'string' || value.length <= max ? null : `${at}: longer than ${max}`);
    }
    case 'pattern': {
      const pattern = new RegExp(argument as string, 'u');
      return (value, at) =>
        typeof value !== 'string' || pattern.test(value) ? null : `${at}: does not match ${pattern}`;
    }
    case 'minItems': {
      const min = number();
      return (value, at) => (!Array.isArray(value) || value.length >= min ? null : `${at}: fewer than ${min} items`);
    }
    case 'items': {
      const item = compileSchema(argument as JsonSchema, where);
      return (value, at) => {
        if (!Array.isArray(value)) return null;
        for (let i = 0; i < value.length; i++) {
          const problem = item(value[i], `${at}[${i}]`);
          if (problem) return problem;
        }
        return null;
      };
    }
    case 'properties': {
      const properties = Object.entries(argument as Record<string, JsonSchema>).map(
        ([name, sub]) => [name, compileSchema(sub, `${where}/${name}`)] as const,
      );
      return (value, at) => {
        if (!isObject(value)) return null;
        for (const [name, check] of properties) {
          if (value[name] === undefined) continue;
          const problem = check(value[name], `${at}.${name}`);
          if (problem) return problem;
        }
        return null;
      };
    }
    case 'required': {
      const names = argument as string[];
      return (value, at) => {
        if (!isObject(value)) return null;
        const missing = names.find((name) => value[name] === undefined);
        return missing === undefined ? null : `${at}.${missing}: required`;
      };
    }
    case 'additionalProperties': {
      const known = new Set(Object.keys((schema.properties as object | undefined) ?? {}));
      const extra = compileSchema(argument as JsonSchema, where);
      return (value, at) => {
        if (!isObject(value)) return null;
        for (const [name, v] of Object.entries(value)) {
          if (known.has(name)) continue;
          const problem = extra(v, `${at}.${name}`);
          if (problem) return problem;
        }
        return null;
      };
    }
    case 'anyOf':
    case 'oneOf': {
      const options = (argument as JsonSchema[]).map((sub, i) => compileSchema(sub, `${where}/${i}`));
      return (value, at) => {
        const problems: string[] = [];
        let fits = 0;
        for (const option of options) {
          const problem = option(value, at);
          if (problem) problems.push(problem);
          else fits++;
        }
        if (keyword === 'anyOf' ? fits > 0 : fits === 1) return null;
        return fits > 1
          ? `${at}: fits more than one of oneOf`
          : `${at}: fits none of ${keyword} (${problems.join('; ')})`;
      };
    }
    default:
      throw new Error(`${where}: JSON Schema keyword not supported by the gateway's validator`);
  }
}
