# One image for every subcommand of vigil (agent, control, janitor, demo, …).
#
#   docker build -t vigil:dev .
#
# The build stage is Debian 12 with the project's own scripts: install-deps
# installs the Debian packages, scripts/build compiles (Release). The runtime
# stage is Debian 12 slim with only the shared libraries `vigil` links, the
# XID catalog and the default vigil.yaml. It runs as an unprivileged user
# (65532) by default, which `vigil control` and `vigil janitor` need no more
# than; the agent's DaemonSet runs it as root (it reads /dev/kmsg and the
# host's sysfs), and nvidia-smi comes from the host through the NVIDIA
# container toolkit, not from this image.

FROM debian:12 AS build
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends ca-certificates git \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY scripts/install-deps scripts/install-deps
RUN scripts/install-deps && rm -rf /var/lib/apt/lists/*
COPY . .
RUN scripts/build /build -DCMAKE_BUILD_TYPE=Release -DVIGIL_WERROR=ON \
 && strip /build/vigil

FROM debian:12-slim
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      ca-certificates libcaf-core0.17 libcaf-io0.17 libcurl4 libfmt9 libgrpc++1.51 \
      libpq5 libprometheus-cpp-core1.0 libprotobuf32 libspdlog1.10 libsqlite3-0 \
      libssl3 libsystemd0 libyaml-cpp0.7 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/vigil /usr/bin/vigil
COPY config/xid_catalog.csv config/nvlink5_decode.csv config/vigil.yaml /usr/share/vigil/
ENV VIGIL_CONFIG_DIR=/usr/share/vigil
USER 65532:65532
ENTRYPOINT ["/usr/bin/vigil"]
CMD ["--help"]
