"""Test double: an in-memory stand-in for the parts of the AWX REST API (v2) the awx.awx modules call.

It is not AWX. It keeps what the modules send, answers their look-ups from
that, and validates nothing the way AWX does (survey specs, playbooks against
the project, permissions): it shows which requests ``awx_configure.yml`` makes,
with what data, and whether a second run changes anything. Objects are stored
as posted, plus ``id``, ``url``, ``type``, ``related`` and ``summary_fields``.

Like AWX, it never returns a credential's secret inputs: they read back as
``$encrypted$`` (``stored_secrets`` keeps what was sent).
Seeded: the organization ``Default`` and the credential type ``Machine``.
A project update finishes at once, successfully, at an unchanged revision.
"""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

API = '/api/v2/'
# Collections of sub-resources: GET lists the associated objects, POST {id} associates, {id, disassociate} removes.
ASSOCIATIONS = ('credentials', 'instance_groups', 'labels', 'success_nodes', 'failure_nodes', 'always_nodes',
                'notification_templates_started', 'notification_templates_success', 'notification_templates_error',
                'notification_templates_approvals', 'galaxy_credentials')
# Resources unified_job_templates lists, with the type each has there.
UNIFIED = {'job_templates': 'job_template', 'workflow_job_templates': 'workflow_job_template',
           'projects': 'project', 'inventory_sources': 'inventory_source'}


SECRET_INPUTS = ('password', 'ssh_key_data', 'ssh_key_unlock', 'become_password', 'vault_password', 'secret', 'token')
ENCRYPTED = '$encrypted$'


def _singular(resource):
    return {'inventories': 'inventory', 'credential_types': 'credential_type'}.get(resource, resource[:-1])


class AwxApiStub:
    """The state, and the server that serves it on 127.0.0.1."""

    def __init__(self):
        self.objects = {}          # resource -> {id: object}
        self.associations = {}     # (resource, id, association) -> [associated ids]
        self.surveys = {}          # (resource, id) -> survey spec
        self.stored_secrets = {}   # credential id -> the secret inputs sent
        self.requests = []         # (method, path, query, body)
        self.next_id = 1
        self.lock = threading.Lock()
        self.add('organizations', {'name': 'Default'})
        self.add('credential_types', {'name': 'Machine', 'kind': 'ssh', 'namespace': 'ssh'})
        self.server = ThreadingHTTPServer(('127.0.0.1', 0), self._handler())
        self.url = 'http://127.0.0.1:%d' % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def _hide_secrets(self, resource, item_id, data):
        if resource != 'credentials' or not isinstance(data.get('inputs'), dict):
            return data
        inputs = dict(data['inputs'])
        for key in SECRET_INPUTS:
            if key in inputs and inputs[key] != ENCRYPTED:
                self.stored_secrets.setdefault(item_id, {})[key] = inputs[key]
                inputs[key] = ENCRYPTED
        return dict(data, inputs=inputs)

    def add(self, resource, data):
        new_id = self.next_id
        self.next_id += 1
        data = self._hide_secrets(resource, new_id, data)
        url = '%s%s/%d/' % (API, resource, new_id)
        item = dict(data, id=new_id, url=url, type=_singular(resource), summary_fields={}, related={
            name: url + name + '/' for name in ASSOCIATIONS + ('survey_spec', 'update', 'schedules', 'copy')})
        if resource == 'projects':
            item['scm_revision'] = 'stub-revision'
            item['related']['update'] = url + 'update/'
        if resource == 'workflow_job_template_nodes' and item.get('unified_job_template'):
            item['related']['unified_job_template'] = self._unified_url(item['unified_job_template'])
        self.objects.setdefault(resource, {})[new_id] = item
        return item

    def find(self, resource, **fields):
        return [item for item in self.objects.get(resource, {}).values()
                if all(item.get(key) == value for key, value in fields.items())]

    def associated(self, item, association):
        resource = item['url'][len(API):].split('/')[0]
        return self.associations.get((resource, item['id'], association), [])

    def survey(self, item):
        return self.surveys.get(('job_templates', item['id']))

    def _unified_url(self, item_id):
        for resource in UNIFIED:
            if item_id in self.objects.get(resource, {}):
                return self.objects[resource][item_id]['url']
        return None

    def _list(self, resource):
        if resource == 'unified_job_templates':
            return [dict(item, type=kind) for name, kind in UNIFIED.items() for item in self.objects.get(name, {}).values()]
        return list(self.objects.get(resource, {}).values())

    @staticmethod
    def _matches(item, query):
        either = [(key[4:], value) for key, value in query.items() if key.startswith('or__')]
        if either and not any(str(item.get(key)) == value for key, value in either):
            return False
        for key, value in query.items():
            if key.startswith('or__') or key in ('page_size', 'page', 'order_by'):
                continue
            field = key.split('__')[0]
            if str(item.get(field)) != value and not (key.endswith('__name') and _name_of(item.get(field)) == value):
                return False
        return True

    def handle(self, method, path, query, body):
        with self.lock:
            self.requests.append((method, path, query, body))
            parts = [part for part in path[len(API):].split('/') if part]
            if not path.startswith(API):
                return 404, {'detail': 'not an API v2 path'}
            if len(parts) == 1:
                return self._collection(method, parts[0], query, body)
            resource, item_id = parts[0], int(parts[1])
            item = self.objects.get(resource, {}).get(item_id)
            if resource == 'project_updates':
                return 200, {'id': item_id, 'url': path, 'status': 'successful', 'failed': False, 'finished': 'now',
                             'scm_revision': 'stub-revision'}
            if item is None:
                return 404, {'detail': 'Not found.'}
            if len(parts) == 2:
                return self._item(method, resource, item, body)
            return self._sub(method, resource, item, parts[2], body)

    def _collection(self, method, resource, query, body):
        if method == 'GET':
            results = [item for item in self._list(resource) if self._matches(item, query)]
            return 200, {'count': len(results), 'next': None, 'previous': None, 'results': results}
        if method == 'POST':
            return 201, self.add(resource, body)
        return 405, {'detail': 'method not allowed'}

    def _item(self, method, resource, item, body):
        if method == 'GET':
            return 200, item
        if method in ('PATCH', 'PUT'):
            item.update(self._hide_secrets(resource, item['id'], body))
            return 200, item
        if method == 'DELETE':
            del self.objects[resource][item['id']]
            return 204, None
        return 405, {'detail': 'method not allowed'}

    def _sub(self, method, resource, item, name, body):
        if name == 'survey_spec':
            key = (resource, item['id'])
            if method == 'GET':
                return 200, self.surveys.get(key, {})
            if method == 'POST':
                self.surveys[key] = body
                return 200, {}
            self.surveys.pop(key, None)
            return 204, None
        if name == 'update' and method == 'POST':
            update_id = self.next_id
            self.next_id += 1
            return 202, {'id': update_id, 'url': '%sproject_updates/%d/' % (API, update_id)}
        if name in ASSOCIATIONS:
            ids = self.associations.setdefault((resource, item['id'], name), [])
            if method == 'GET':
                found = [self._find_any(an_id) for an_id in ids]
                return 200, {'count': len(found), 'next': None, 'previous': None, 'results': found}
            if body.get('disassociate'):
                ids.remove(body['id'])
            elif body['id'] not in ids:
                ids.append(body['id'])
            return 204, None
        return 404, {'detail': 'no such sub-resource in the stub: %s' % name}

    def _find_any(self, item_id):
        for items in self.objects.values():
            if item_id in items:
                return items[item_id]
        return {'id': item_id}

    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self):
                url = urlsplit(self.path)
                length = int(self.headers.get('Content-Length') or 0)
                raw = self.rfile.read(length) if length else b''
                body = json.loads(raw) if raw else {}
                status, payload = stub.handle(self.command, url.path, dict(parse_qsl(url.query)), body)
                data = b'' if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(data)))
                self.send_header('X-API-Product-Name', 'AWX')
                self.send_header('X-API-Product-Version', '24.6.1')
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

            def log_message(self, *args):  # pylint: disable=arguments-differ
                pass

        return Handler


def _name_of(value):
    return value.get('name') if isinstance(value, dict) else value
