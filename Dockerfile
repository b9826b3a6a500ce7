# sharedos serve in a container: a static binary (CGO off: the SQLite driver is pure Go)
# on distroless's static base, run as a non-root user. Build and run:
#
#   docker build -t sharedos .
#   docker run --rm -p 8080:8080 -v "$PWD/etc:/etc/sharedos:ro" -v sharedos-state:/var/lib/sharedos \
#     -v "$PWD/project:/srv/root" sharedos
#
# ./etc holds tokens.yaml and the grant files it names; it and the root are mounted; the state database
# lives in the volume. Off loopback serve needs TLS (--tls-cert/--tls-key) or, behind a
# TLS-terminating proxy, --insecure-listen (as below).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/sharedos . && \
    mkdir -p /out/state && touch /out/state/.keep

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sharedos /usr/local/bin/sharedos
COPY --from=build --chown=65532:65532 /out/state /var/lib/sharedos
USER 65532:65532
ENV HOME=/var/lib/sharedos
EXPOSE 8080
HEALTHCHECK NONE
ENTRYPOINT ["/usr/local/bin/sharedos"]
CMD ["--root", "/srv/root", "--state", "/var/lib/sharedos/state.db", "serve", "--listen", "0.0.0.0:8080", \
     "--insecure-listen", "--tokens", "/etc/sharedos/tokens.yaml"]
