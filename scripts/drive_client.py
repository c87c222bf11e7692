"""Google's own Drive client (google-api-python-client, unmodified) against the CloudSync Drive emulator.

Usage: drive_client.py [--ca CA_FILE] BASE_URL ACCESS_TOKEN SWIFT_KEY

Without --ca, the bundled Drive v3 discovery document is pointed at BASE_URL (its rootUrl), as one would point it at
any Drive endpoint, over plain HTTP. With --ca (for `cloudsync-emulator --tls`, BASE_URL https://), the document is
left as it is and the client is built the way an app overrides the endpoint, `build("drive", "v3",
static_discovery=True, client_options={"api_endpoint": BASE_URL + "drive/v3/"})`, over an httplib2 connection that
trusts CA_FILE (and, as the client's own build_http() does, does not take 308 for a redirect). The client then
sends uploads to BASE_URL by itself, but batches still to the discovery document's rootUrl (www.googleapis.com), so
the batch is made with batch_uri BASE_URL + "batch/drive/v3" (what it would have used is reported as
defaultBatchUri).

Does what Google's client does for an app data folder: create with multipart, list with q, download
with alt=media, update, a resumable upload of 3 MiB in 256 KiB chunks, about, changes, and a batch of deletes; reads
the value CloudSync wrote under SWIFT_KEY and leaves one file named "from-python" for CloudSync to read. Then the
steps of fidelity_steps: partial responses (`fields`, and what comes back without it), paging with list_next, a
ranged download in small chunks, generateIds and a create with a generated id, a `q` with `or` and parentheses, and
md5Checksum; the files they make are deleted again. Prints one JSON object of what it saw; any disagreement with the
emulator raises (exit status 1).
"""

import argparse
import hashlib
import io
import json
import urllib.parse

import google.oauth2.credentials
import google_auth_httplib2
import httplib2
from googleapiclient.discovery import build, build_from_document
from googleapiclient.discovery_cache import get_static_doc
from googleapiclient.http import BatchHttpRequest, MediaInMemoryUpload, MediaIoBaseDownload


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ca", help="trust this CA file and use the unmodified discovery document (HTTPS)")
    parser.add_argument("base")
    parser.add_argument("token")
    parser.add_argument("swift_key")
    arguments = parser.parse_args()
    base, swift_key = arguments.base.rstrip("/") + "/", arguments.swift_key
    credentials = google.oauth2.credentials.Credentials(token=arguments.token)
    seen = {}
    if arguments.ca:
        # build() refuses credentials beside http; AuthorizedHttp is how the token rides on a connection of one's own.
        # Like the one build() makes for itself (googleapiclient.http.build_http), it must not follow 308: Drive
        # answers a resumable chunk with 308 and no Location, which httplib2 would take for a broken redirect.
        connection = httplib2.Http(ca_certs=arguments.ca)
        connection.redirect_codes = connection.redirect_codes - {308}
        http = google_auth_httplib2.AuthorizedHttp(credentials, http=connection)
        drive = build(
            "drive", "v3", http=http, static_discovery=True,
            client_options={"api_endpoint": base + "drive/v3/"},
        )
        seen["defaultBatchUri"] = drive.new_batch_http_request()._batch_uri

        def new_batch(callback):
            return BatchHttpRequest(callback=callback, batch_uri=base + "batch/drive/v3")
    else:
        document = json.loads(get_static_doc("drive", "v3"))
        document["rootUrl"] = base
        document["mtlsRootUrl"] = base
        drive = build_from_document(document, credentials=credentials)

        def new_batch(callback):
            return drive.new_batch_http_request(callback=callback)

    created = drive.files().create(
        body={"name": "py-note", "parents": ["appDataFolder"]},
        media_body=MediaInMemoryUpload(b"hello from python", mimetype="text/plain"),
        fields="id,name,parents",
    ).execute()
    seen["created"] = created["name"]

    listed = drive.files().list(
        spaces="appDataFolder", q="name = 'py-note' and trashed = false", pageSize=10,
        fields="nextPageToken,files(id,name,modifiedTime)",
    ).execute()
    seen["listed"] = [item["id"] for item in listed["files"]] == [created["id"]]

    buffer = io.BytesIO()
    downloader = MediaIoBaseDownload(buffer, drive.files().get_media(fileId=created["id"]))
    done = False
    while not done:
        _, done = downloader.next_chunk()
    seen["downloaded"] = buffer.getvalue().decode()

    drive.files().update(
        fileId=created["id"], media_body=MediaInMemoryUpload(b"changed by python", mimetype="text/plain")
    ).execute()
    seen["updated"] = drive.files().get_media(fileId=created["id"]).execute().decode()

    payload = bytes(range(256)) * (3 * 1024 * 1024 // 256)
    request = drive.files().create(
        body={"name": "py-big", "parents": ["appDataFolder"]},
        media_body=MediaInMemoryUpload(payload, mimetype="application/octet-stream", chunksize=262144, resumable=True),
        fields="id,size",
    )
    chunks = 0
    response = None
    while response is None:
        _, response = request.next_chunk()
        chunks += 1
        if chunks == 1:
            session = urllib.parse.urlsplit(request.resumable_uri)
            seen["resumableSession"] = "%s://%s" % (session.scheme, session.netloc)
    seen["resumableChunks"] = chunks
    seen["resumableSize"] = int(response["size"])
    seen["resumableIntact"] = drive.files().get_media(fileId=response["id"]).execute() == payload

    swift = drive.files().list(
        spaces="appDataFolder", q="name = '%s' and trashed = false" % swift_key.replace("'", "\\'"),
        fields="files(id)",
    ).execute()["files"]
    seen["swiftValue"] = drive.files().get_media(fileId=swift[0]["id"]).execute().decode() if swift else None

    about = drive.about().get(fields="storageQuota,user").execute()
    seen["permissionId"] = about["user"]["permissionId"]
    seen["hasLimit"] = "limit" in about["storageQuota"]

    start = drive.changes().getStartPageToken().execute()["startPageToken"]
    extras = [
        drive.files().create(body={"name": "py-extra-%d" % n, "parents": ["appDataFolder"]}, fields="id").execute()["id"]
        for n in range(3)
    ]
    changes = drive.changes().list(pageToken=start, spaces="appDataFolder").execute()
    seen["changes"] = len(changes["changes"])

    deleted = []

    def callback(request_id, response, exception):
        if exception is not None:
            raise exception
        deleted.append(request_id)

    batch = new_batch(callback)
    for file_id in extras + [response["id"]]:
        batch.add(drive.files().delete(fileId=file_id))
    batch.execute()
    seen["batchDeleted"] = len(deleted)

    drive.files().create(
        body={"name": "from-python", "parents": ["appDataFolder"]},
        media_body=MediaInMemoryUpload("written by Google's client ✓".encode(), mimetype="text/plain"),
    ).execute()
    remaining = drive.files().list(spaces="appDataFolder", fields="files(name)", orderBy="name").execute()
    seen["remaining"] = [item["name"] for item in remaining["files"]]
    fidelity_steps(drive, seen)
    print(json.dumps(seen, sort_keys=True))


FIDELITY_PAYLOAD = bytes(range(256)) * 4 + b"fidelity"


def fidelity_steps(drive, seen):
    """Where Google's client relies on Drive's own reading of the API; records what it saw in `seen`."""
    made = fields_steps(drive, seen)
    made += paging_steps(drive, seen)
    ranged_download_steps(drive, seen, made[0])
    made += generated_id_steps(drive, seen)
    query_steps(drive, seen)
    for file_id in made:
        drive.files().delete(fileId=file_id).execute()


def fields_steps(drive, seen):
    """A file of FIDELITY_PAYLOAD; get and list with and without `fields`. Returns the ids it made."""
    created = drive.files().create(
        body={"name": "fidelity", "parents": ["appDataFolder"]},
        media_body=MediaInMemoryUpload(FIDELITY_PAYLOAD, mimetype="application/octet-stream"),
        fields="id,md5Checksum,size,parents",
    ).execute()
    seen["fieldsCreated"] = sorted(created)
    seen["md5Checksum"] = created["md5Checksum"]
    seen["md5Matches"] = created["md5Checksum"] == hashlib.md5(FIDELITY_PAYLOAD).hexdigest()
    seen["parents"] = created["parents"]
    seen["defaultGet"] = sorted(drive.files().get(fileId=created["id"]).execute())
    seen["selectedGet"] = drive.files().get(fileId=created["id"], fields="name,size").execute()
    listed = drive.files().list(spaces="appDataFolder", q="name = 'fidelity'").execute()
    seen["defaultList"] = sorted(listed)
    seen["defaultListFile"] = sorted(listed["files"][0])
    return [created["id"]]


def paging_steps(drive, seen):
    """Five files, listed two a page through list_next. Returns the ids it made."""
    made = [
        drive.files().create(body={"name": "page-%d" % n, "parents": ["appDataFolder"]}, fields="id").execute()["id"]
        for n in range(5)
    ]
    names, pages = [], 0
    request = drive.files().list(
        spaces="appDataFolder", q="name contains 'page-'", pageSize=2, orderBy="name",
        fields="nextPageToken,files(name)",
    )
    while request is not None:
        response = request.execute()
        pages += 1
        names += [item["name"] for item in response["files"]]
        request = drive.files().list_next(request, response)
    seen["pagedNames"] = names
    seen["pages"] = pages
    return made


def ranged_download_steps(drive, seen, file_id):
    """Downloads FIDELITY_PAYLOAD in 256-byte chunks: MediaIoBaseDownload asks for each with a Range header."""
    buffer = io.BytesIO()
    downloader = MediaIoBaseDownload(buffer, drive.files().get_media(fileId=file_id), chunksize=256)
    chunks, done = 0, False
    while not done:
        status, done = downloader.next_chunk()
        chunks += 1
    seen["rangedChunks"] = chunks
    seen["rangedTotal"] = status.total_size
    seen["rangedIntact"] = buffer.getvalue() == FIDELITY_PAYLOAD


def generated_id_steps(drive, seen):
    """Two ids from generateIds; a create that carries the first. Returns the ids it made."""
    generated = drive.files().generateIds(count=2, space="appDataFolder").execute()
    seen["generatedCount"] = len(generated["ids"])
    created = drive.files().create(
        body={"id": generated["ids"][0], "name": "generated", "parents": ["appDataFolder"]}, fields="id"
    ).execute()
    seen["generatedUsed"] = created["id"] == generated["ids"][0]
    return [created["id"]]


def query_steps(drive, seen):
    """A q of `or` in parentheses, joined by `and`."""
    found = drive.files().list(
        spaces="appDataFolder", orderBy="name", fields="files(name)",
        q="(name = 'page-1' or name = 'generated') and not name = 'page-2' and trashed = false",
    ).execute()
    seen["queried"] = [item["name"] for item in found["files"]]


if __name__ == "__main__":
    main()
