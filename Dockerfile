# The image the Kubernetes manifests run (`phalanx up`), and that `docker run` can too.
# The wheel is built in a full image, which has the C compiler mypyc needs for the
# scheduler core; without one the core would ship as Python, about half as fast.
FROM python:3.11 AS build
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY src ./src
RUN pip wheel --no-cache-dir --no-deps -w /wheels .

FROM python:3.11-slim
# The manifests run the pods as this non-root user (runAsUser 10001).
RUN useradd --uid 10001 --create-home phalanx
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir "$(ls /wheels/phalanx-*.whl)[postgres]" && rm -rf /wheels
USER 10001
EXPOSE 7780
ENTRYPOINT ["phalanx"]
CMD ["up", "--host", "0.0.0.0"]
